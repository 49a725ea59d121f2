//! Golden files for `top`, `--callers`, `--modules` and `diff`, over real captures of the
//! demo node made with `devprof cpu ... 3` (999 Hz, cpu-clock, frame pointers):
//! - cpu-demo-seq.folded      demo-seq, the default workloads (hash_chain:40,
//!   state_lookup:15, contend_lock:10, sync_writes:10, mmap_reads:10, alloc_blocks:5)
//! - cpu-demo-shifted.folded  the demo node with DEMO_WORKLOADS=hash_chain:15,
//!   state_lookup:50, contend_lock:10, sync_writes:10 (the "after" of the diff)
//! - perf-script-demo-seq.folded  the 1 s capture of golden_fold.rs
//!
//! The expected figures were not produced by devprof: they come from a separate Python
//! one-off run by hand over the same files, with the same definitions (root frame = the
//! thread name, never ranked; self = the last frame; inclusive = each distinct frame once
//! per stack; callers = the nearest frame matching the module above the innermost frame
//! matching the pattern; modules = the innermost frame matching, named by group 1; diff
//! shares = count / the profile's own total; differential lines = before * after_total /
//! before_total, rounded down). Percentages are compared to 4 decimals.

use devprof::profile::diff::{compare, differential_lines, Measure};
use devprof::profile::folded::Folded;
use devprof::profile::top::{by_inclusive, by_self, callers, modules, Row, NO_CALLER, OTHER};
use regex::Regex;

const SEQ: &str = include_str!("data/cpu-demo-seq.folded");
const SHIFTED: &str = include_str!("data/cpu-demo-shifted.folded");
const SEQ_1S: &str = include_str!("data/perf-script-demo-seq.folded");

fn folded(text: &str) -> Folded {
    Folded::from_folded_text(text)
}

/// Rows as (name, samples, percent to 4 decimals).
fn table(rows: &[Row]) -> Vec<(String, u64, String)> {
    rows.iter()
        .map(|r| (r.name.clone(), r.samples, format!("{:.4}", r.percent)))
        .collect()
}

fn expect(rows: &[(&str, u64, &str)]) -> Vec<(String, u64, String)> {
    rows.iter()
        .map(|(n, s, p)| (n.to_string(), *s, p.to_string()))
        .collect()
}

#[test]
fn top_by_self_samples_of_demo_seq() {
    let f = folded(SEQ);
    assert_eq!(f.total(), 891);
    assert_eq!(f.stacks.len(), 82);
    assert_eq!(
        table(&by_self(&f, 5)),
        expect(&[
            ("demo_node::workloads::hash_chain", 333, "37.3737"),
            ("demo_node::workloads::state_lookup", 248, "27.8339"),
            ("demo_node::workloads::contend_lock", 109, "12.2334"),
            ("handle_softirqs", 40, "4.4893"),
            ("iowrite16", 31, "3.4792"),
        ])
    );
}

#[test]
fn top_by_self_samples_of_the_1s_capture() {
    let f = folded(SEQ_1S);
    assert_eq!(f.total(), 142);
    assert_eq!(
        table(&by_self(&f, 3)),
        expect(&[
            ("demo_node::workloads::hash_chain", 78, "54.9296"),
            ("demo_node::workloads::state_lookup", 29, "20.4225"),
            ("demo_node::workloads::contend_lock", 13, "9.1549"),
        ])
    );
}

#[test]
fn top_by_inclusive_samples_of_demo_seq() {
    assert_eq!(
        table(&by_inclusive(&folded(SEQ), 5)),
        expect(&[
            (
                "<std::sys::thread::unix::Thread>::new::thread_start",
                891,
                "100.0000"
            ),
            ("[libc.so.6]", 891, "100.0000"),
            (
                "core::ops::function::FnOnce::call_once{{vtable.shim}}",
                891,
                "100.0000"
            ),
            (
                "std::sys::backtrace::__rust_begin_short_backtrace",
                891,
                "100.0000"
            ),
            // Inclusive exceeds self (333): hash_chain also calls into the kernel.
            ("demo_node::workloads::hash_chain", 335, "37.5982"),
        ])
    );
}

#[test]
fn callers_of_device_io_by_workload() {
    let c = callers(
        &folded(SEQ),
        &Regex::new("^iowrite16$").unwrap(),
        Some(&Regex::new("^demo_node::").unwrap()),
        10,
    );
    assert_eq!(c.matched, 69);
    assert_eq!(format!("{:.4}", c.matched_percent), "7.7441");
    assert_eq!(
        table(&c.rows),
        expect(&[
            ("demo_node::workloads::mmap_reads", 64, "92.7536"),
            ("demo_node::workloads::sync_writes", 5, "7.2464"),
        ])
    );
}

#[test]
fn callers_of_page_faults_by_workload_with_the_unattributed_rest() {
    let c = callers(
        &folded(SEQ),
        &Regex::new("^asm_exc_page_fault$").unwrap(),
        Some(&Regex::new("^demo_node::").unwrap()),
        10,
    );
    assert_eq!(c.matched, 122);
    assert_eq!(format!("{:.4}", c.matched_percent), "13.6925");
    assert_eq!(
        table(&c.rows),
        expect(&[
            ("demo_node::workloads::mmap_reads", 102, "83.6066"),
            ("demo_node::workloads::alloc_blocks", 9, "7.3770"),
            (NO_CALLER, 11, "9.0164"),
        ])
    );
}

#[test]
fn immediate_callers_without_a_module() {
    let c = callers(
        &folded(SEQ),
        &Regex::new("^handle_mm_fault$").unwrap(),
        None,
        10,
    );
    assert_eq!(c.matched, 114);
    assert_eq!(
        table(&c.rows),
        expect(&[("exc_page_fault", 114, "100.0000")])
    );
}

#[test]
fn module_shares_by_workload_with_the_rest_as_other() {
    let rows = modules(
        &folded(SEQ),
        &Regex::new(r"^demo_node::workloads::(\w+)$").unwrap(),
    );
    assert_eq!(
        table(&rows),
        expect(&[
            ("hash_chain", 335, "37.5982"),
            ("state_lookup", 252, "28.2828"),
            ("contend_lock", 132, "14.8148"),
            ("mmap_reads", 105, "11.7845"),
            ("alloc_blocks", 34, "3.8159"),
            ("sync_writes", 18, "2.0202"),
            (OTHER, 15, "1.6835"),
        ])
    );
}

#[test]
fn module_shares_by_crate() {
    let rows = modules(&folded(SEQ), &Regex::new(r"^(\w+)::").unwrap());
    assert_eq!(
        table(&rows),
        expect(&[
            ("demo_node", 864, "96.9697"),
            ("std", 15, "1.6835"),
            ("alloc", 12, "1.3468"),
        ])
    );
}

/// (name, before, after, before %, after %, change) to 4 decimals.
type Change = (String, u64, u64, String, String, String);

fn changes(rows: &[&devprof::profile::diff::DiffRow]) -> Vec<Change> {
    rows.iter()
        .map(|r| {
            (
                r.name.clone(),
                r.before,
                r.after,
                format!("{:.4}", r.before_percent),
                format!("{:.4}", r.after_percent),
                format!("{:+.4}", r.delta_points),
            )
        })
        .collect()
}

fn change(n: &str, b: u64, a: u64, bp: &str, ap: &str, d: &str) -> Change {
    (
        n.into(),
        b,
        a,
        bp.to_string(),
        ap.to_string(),
        d.to_string(),
    )
}

#[test]
fn diff_of_demo_seq_and_shifted_workloads_by_self_samples() {
    let d = compare(&folded(SEQ), &folded(SHIFTED), Measure::SelfTime);
    assert_eq!((d.before_total, d.after_total), (891, 667));
    assert_eq!(
        changes(&d.gains(4)),
        vec![
            change(
                "demo_node::workloads::state_lookup",
                248,
                360,
                "27.8339",
                "53.9730",
                "+26.1391"
            ),
            change(
                "demo_node::workloads::contend_lock",
                109,
                143,
                "12.2334",
                "21.4393",
                "+9.2058"
            ),
            change("[unknown]", 0, 42, "0.0000", "6.2969", "+6.2969"),
            change(
                "__vdso_clock_gettime",
                11,
                23,
                "1.2346",
                "3.4483",
                "+2.2137"
            ),
        ]
    );
    assert_eq!(
        changes(&d.losses(4)),
        vec![
            change(
                "demo_node::workloads::hash_chain",
                333,
                92,
                "37.3737",
                "13.7931",
                "-23.5806"
            ),
            change("handle_softirqs", 40, 0, "4.4893", "0.0000", "-4.4893"),
            change("iowrite16", 31, 0, "3.4792", "0.0000", "-3.4792"),
            change(
                "finish_task_switch.isra.0",
                22,
                0,
                "2.4691",
                "0.0000",
                "-2.4691"
            ),
        ]
    );
}

#[test]
fn diff_of_demo_seq_and_shifted_workloads_by_inclusive_samples() {
    let d = compare(&folded(SEQ), &folded(SHIFTED), Measure::Inclusive);
    assert_eq!(
        changes(&d.gains(2)),
        vec![
            change(
                "demo_node::workloads::state_lookup",
                252,
                380,
                "28.2828",
                "56.9715",
                "+28.6887"
            ),
            change(
                "demo_node::workloads::contend_lock",
                132,
                182,
                "14.8148",
                "27.2864",
                "+12.4715"
            ),
        ]
    );
    assert_eq!(
        changes(&d.losses(3)),
        vec![
            change(
                "demo_node::workloads::hash_chain",
                335,
                94,
                "37.5982",
                "14.0930",
                "-23.5053"
            ),
            change(
                "asm_exc_page_fault",
                122,
                0,
                "13.6925",
                "0.0000",
                "-13.6925"
            ),
            change("exc_page_fault", 120, 0, "13.4680", "0.0000", "-13.4680"),
        ]
    );
}

#[test]
fn differential_lines_scale_before_to_the_after_total() {
    let lines = differential_lines(&folded(SEQ), &folded(SHIFTED)).unwrap();
    // 82 stacks before, 30 after, 6 in both.
    assert_eq!(lines.len(), 106);
    let counts = |stack: &str| -> (u64, u64) {
        let line = lines
            .iter()
            .find(|l| l.rsplitn(3, ' ').nth(2) == Some(stack))
            .unwrap_or_else(|| panic!("{stack} missing"));
        let mut fields = line.rsplitn(3, ' ');
        let after = fields.next().unwrap().parse().unwrap();
        let before = fields.next().unwrap().parse().unwrap();
        (before, after)
    };
    let prefix = |thread: &str| {
        format!(
            "{thread};[libc.so.6];<std::sys::thread::unix::Thread>::new::thread_start;\
             core::ops::function::FnOnce::call_once{{{{vtable.shim}}}};\
             std::sys::backtrace::__rust_begin_short_backtrace;demo_node::workloads::{thread}"
        )
    };
    // 333 * 667 / 891 = 249.28 -> 249; 248 -> 185.65 -> 185; 109 -> 81.60 -> 81.
    assert_eq!(counts(&prefix("hash_chain")), (249, 92));
    assert_eq!(counts(&prefix("state_lookup")), (185, 360));
    assert_eq!(counts(&prefix("contend_lock")), (81, 143));
    // 10 -> 7.49 -> 7, and 23 after.
    assert_eq!(
        counts(&format!(
            "{};<std::time::Instant>::elapsed;clock_gettime;__vdso_clock_gettime",
            prefix("contend_lock")
        )),
        (7, 23)
    );
    // Only before: 37 -> 27.70 -> 27, and 0 after.
    assert_eq!(
        counts(&format!(
            "{};asm_exc_page_fault;exc_page_fault;handle_mm_fault;__handle_mm_fault;do_fault;\
             __do_fault;filemap_fault;filemap_read_folio;ext4_mpage_readpages;\
             submit_bio_noacct_nocheck;__submit_bio;__blk_flush_plug;blk_mq_flush_plug_list;\
             blk_mq_dispatch_list;blk_mq_run_hw_queue;blk_mq_sched_dispatch_requests;\
             __blk_mq_sched_dispatch_requests;blk_mq_dispatch_rq_list;virtio_queue_rq;\
             virtqueue_notify;vp_notify;iowrite16;asm_common_interrupt;common_interrupt;\
             __irq_exit_rcu;handle_softirqs",
            prefix("mmap_reads")
        )),
        (27, 0)
    );
    let before_sum: u64 = lines
        .iter()
        .map(|l| l.rsplit(' ').nth(1).unwrap().parse::<u64>().unwrap())
        .sum();
    let after_sum: u64 = lines
        .iter()
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!((before_sum, after_sum), (611, 667));
}
