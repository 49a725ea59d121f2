//! A fetched Go heap profile written into the store: folded stacks, a memory flamegraph
//! and the manifest's heap record (the original `.pb.gz` is already kept). A CPU profile
//! needs none of this: its folded stacks go the way of every engine's.

use super::{Fetched, PprofKind};
use crate::error::Result;
use crate::render::{write_folded_file, write_svg_file, SvgSpec};
use crate::store::{self, GraphRecord, Manifest, Stem};
use crate::units::human_bytes;

/// The files a Go heap capture writes next to its manifest.
pub const HEAP_EXTENSIONS: &[&str] = &["pb.gz", "folded", "svg"];

/// Writes `.folded` and `.svg` at `stem` and completes `manifest` (the capture's identity
/// and window, from the caller) with what the heap profile says.
pub fn write_heap_capture(
    container: &str,
    allocated: bool,
    fetched: &Fetched,
    manifest: &mut Manifest,
    stem: &Stem,
) -> Result<Vec<&'static str>> {
    let Fetched {
        url,
        profile,
        folded,
        download_ms,
    } = fetched;
    let kind = PprofKind::Heap { allocated };
    write_folded_file(folded, &stem.path("folded"))?;
    let total = folded.total();
    let title = format!(
        "{container} — Go heap, {} — {}",
        if allocated {
            "allocated since start (alloc_space)"
        } else {
            "in use (inuse_space)"
        },
        human_bytes(total)
    );
    let mut spec = SvgSpec::cpu(title, None);
    spec.count_name = store::units::BYTES.into();
    spec.palette =
        inferno::flamegraph::color::Palette::Basic(inferno::flamegraph::color::BasicPalette::Mem);
    write_svg_file(folded, &spec, &stem.path("svg"))?;

    manifest.sample_count = total;
    manifest.unsymbolized_share = (folded.unsymbolized_share() * 1000.0).round() / 1000.0;
    manifest.top_functions = folded.top_self(10);
    manifest.timings_ms.insert("download".into(), *download_ms);
    manifest.graphs.push(GraphRecord {
        svg: stem.file_name("svg"),
        folded: stem.file_name("folded"),
        view: "unfiltered".into(),
        unit: store::units::BYTES.into(),
    });
    manifest.notes.push(format!(
        "profile from {url}; the original is kept as {}",
        stem.file_name("pb.gz")
    ));
    manifest.heap = Some(crate::profile::heap::HeapRecord {
        measure: if allocated { "allocated" } else { "in-use" }.into(),
        how: format!(
            "Go runtime heap profile from {url} ({})",
            kind.sample_type()
        ),
        total_bytes: total,
        total_objects: profile
            .value_index(if allocated {
                "alloc_objects"
            } else {
                "inuse_objects"
            })
            .map(|i| profile.total(i))
            .unwrap_or(0),
        stacks: folded.stacks.len(),
        top_self: folded.top_self(25),
        top_inclusive: crate::profile::top::by_inclusive(folded, 25)
            .into_iter()
            .map(|r| (r.name, r.samples))
            .collect(),
        ..Default::default()
    });
    Ok(HEAP_EXTENSIONS.to_vec())
}
