pub mod cpu;
pub mod fold;
