//! Host → loop signals: [`StepLimit`], [`Cancellable`], [`Interloper`].
//! The boundary table (which control is read when) is in the crate docs,
//! section "Controls".

mod cancellable;
mod interloper;
mod step_limit;

pub(crate) use cancellable::CancelHook;
pub use cancellable::Cancellable;
pub use interloper::Interloper;
pub use step_limit::{OnExhausted, StepLimit};
