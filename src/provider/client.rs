//! HTTP client (being written).
#![allow(dead_code)]
/// Client.
#[derive(Debug)]
pub(crate) struct Client;
/// Exchange.
#[derive(Debug)]
pub(crate) struct Exchange;
