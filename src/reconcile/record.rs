//! The record step of a pass: what the plan decided, written to the books before
//! anything external happens. Free runners bound to open launches get their lease;
//! each intent gets its `pending` row, then the next open launch of its profile (if
//! any) is bound to it. The books are a trait, so the daemon writes its store and
//! the property tests an in-memory list through the same steps.

use crate::reconcile::launch_book::LaunchBook;
use crate::reconcile::plan::{Intent, Plan};

/// Where a pass records.
pub trait Books {
    type Error;
    /// Records an intent's `pending` row; returns its attempt id.
    fn intent(&mut self, intent: &Intent) -> Result<i64, Self::Error>;
    /// Records that the attempt serves the launch `lease`.
    fn lease(&mut self, attempt: i64, lease: &str) -> Result<(), Self::Error>;
}

/// Records `plan` for `target`, in order; stops at the first write that fails (the
/// intents recorded before it stand, and are returned with the error).
pub fn record<B: Books>(
    plan: &Plan,
    book: &mut LaunchBook,
    target: &str,
    books: &mut B,
) -> (Vec<i64>, Option<B::Error>) {
    let mut recorded = Vec::with_capacity(plan.intents.len());
    let mut steps = || -> Result<(), B::Error> {
        for (lease, id) in &plan.bindings {
            books.lease(*id, lease)?;
        }
        for i in &plan.intents {
            let id = books.intent(i)?;
            recorded.push(id);
            if let Some(lease) = book.bind_next(target, &i.profile, id) {
                books.lease(id, &lease)?;
            }
        }
        Ok(())
    };
    let failed = steps().err();
    (recorded, failed)
}
