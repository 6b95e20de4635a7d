//! Pure decisions of a pass: allocation with its limiting factor, jobs to profiles, what to do with each attempt.
