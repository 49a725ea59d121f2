//! Getting containers ready to profile: profiling images (`build`), the compose override
//! that gives services the rights perf needs (`compose`), and the checklist of what would
//! make a profile empty, hex-only or denied (`doctor`).

pub mod compose;
pub mod doctor;
pub mod image;
