//! What perf printed: the summary line of `perf record` and lost chunks.

/// What `perf record` said when it finished.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecordReport {
    pub samples: Option<u64>,
    pub megabytes: Option<f64>,
    pub lost_chunks: Option<u64>,
}

/// Parses `[ perf record: Captured and wrote 0.123 MB perf.data (4567 samples) ]` and
/// `Processed N events and lost M chunks!`.
pub fn parse_record_report(stderr: &str) -> RecordReport {
    let mut report = RecordReport::default();
    for line in stderr.lines() {
        if let Some(rest) = line.split("Captured and wrote ").nth(1) {
            report.megabytes = rest.split_whitespace().next().and_then(|v| v.parse().ok());
            if let Some(inner) = rest.rsplit_once('(').map(|(_, r)| r) {
                report.samples = inner.split_whitespace().next().and_then(|v| v.parse().ok());
            }
        }
        if let Some(rest) = line.split(" and lost ").nth(1) {
            report.lost_chunks = rest.split_whitespace().next().and_then(|v| v.parse().ok());
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_perf_record_report() {
        let r = parse_record_report(
            "[ perf record: Woken up 3 times to write data ]\n\
             [ perf record: Captured and wrote 0.469 MB /tmp/d/perf.data (4958 samples) ]\n",
        );
        assert_eq!((r.samples, r.megabytes), (Some(4958), Some(0.469)));
        let z = parse_record_report(
            "[ perf record: Captured and wrote 0.001 MB /tmp/z.data, compressed (original 0.001 MB, ratio is 1.948) ]",
        );
        assert_eq!(z.samples, None);
        let lost = parse_record_report("Processed 51234 events and lost 7 chunks!");
        assert_eq!(lost.lost_chunks, Some(7));
    }
}
