//! The order a run stores a response's tool results in: call order,
//! always. A sequential batch answers each call before the next starts; a
//! parallel batch stores its results only once every call returned, in
//! call order; a stopped batch, a deferred approval and a resume answer
//! the calls still open in call order too. So a result must answer the
//! first call still open: one for a later call, out of that order, is a
//! sequence no run writes (swapped or moved records), refused by the
//! replay as [`Error::JournalCorrupt`](crate::Error::JournalCorrupt).
//! (A result for a call that is not open at all, never made or answered
//! already, the replay refuses itself.)

/// Check that the result for the call at index `at` of `open` (the
/// response's calls not yet answered, in call order) comes in call order;
/// what is wrong otherwise.
pub(crate) fn in_call_order(open: &[String], at: usize) -> Result<(), String> {
    if at == 0 {
        Ok(())
    } else {
        Err(format!(
            "a result for tool call `{}` before the result for `{}`, which comes first in call order",
            open[at], open[0]
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_first_open_call_may_be_answered() {
        let open = vec!["c1".to_string(), "c2".to_string()];
        assert_eq!(in_call_order(&open, 0), Ok(()));
        let err = in_call_order(&open, 1).unwrap_err();
        assert!(err.contains("`c2` before the result for `c1`"), "{err}");
    }
}
