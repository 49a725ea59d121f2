//! The kernel's symbols for a native fold: this host's kept copy read while the window
//! runs (`KernelPreload`), and the container's own listing, which says which kernel it
//! runs and prints kallsyms unless a copy is kept for that boot.

use crate::docker::ContainerShell;
use crate::profile::perfdata::stacks::RawProfile;
use crate::symbols::kallsyms::Kallsyms;
use crate::symbols::kernel_cache::{self, KernelIdentity, Source};
use crate::text::quote;
use std::path::{Path, PathBuf};

/// This host's kept copy of the kernel's symbols, read on another thread while a window
/// runs (a local engine's containers run on this host's kernel): parsing its 120,000 lines
/// took 60-80 ms after the window on a loaded host. Used only when the container's own
/// listing names the same kernel. One per capture's engine.
#[derive(Default)]
pub struct KernelPreload {
    slot: std::sync::Mutex<Option<PreloadedKernel>>,
}

struct PreloadedKernel {
    cache: PathBuf,
    read: tokio::task::JoinHandle<Option<(KernelIdentity, Kallsyms)>>,
}

impl KernelPreload {
    /// Starts reading this host's kept kernel copy in the store's symbol cache `cache`.
    pub fn start(&self, cache: PathBuf) {
        let kept_in = cache.clone();
        let read = tokio::task::spawn_blocking(move || {
            let id = KernelIdentity::of_this_host()?;
            let kept = kernel_cache::load(&kept_in, &id, Source::Container)?;
            Some((id, kept))
        });
        *self.slot.lock().unwrap_or_else(|e| e.into_inner()) =
            Some(PreloadedKernel { cache, read });
    }

    /// The copy `start` read from `cache`, when it is of the kernel `id` names.
    async fn take(&self, cache: &Path, id: &KernelIdentity) -> Option<Kallsyms> {
        let preloaded = {
            let mut slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
            if slot.as_ref().is_none_or(|p| p.cache != cache) {
                return None;
            }
            slot.take()?
        };
        let (read_for, kept) = preloaded.read.await.ok()??;
        (read_for == *id).then_some(kept)
    }
}

/// Ends the list of modules in the script's output; kallsyms follows, when printed.
pub(super) const KALLSYMS_FOLLOWS: &str = "@@devprof-kallsyms";
/// Ends kallsyms; the list of modules follows again (a module loaded during the read may
/// be half in it: such a list is not kept).
pub(super) const MODULES_AGAIN: &str = "@@devprof-modules";

/// The script that says which kernel this is, and prints kallsyms unless a copy is kept
/// for it (every kept boot is asked about: the host's and an engine's VM may differ).
pub(super) fn kernel_listing_script(cache: &Path) -> String {
    let kept_boots: Vec<String> = kernel_cache::kept_boots(cache)
        .iter()
        .map(|b| quote(b))
        .collect();
    let pattern = if kept_boots.is_empty() {
        "none".to_string()
    } else {
        kept_boots.join("|")
    };
    format!(
        "read -r boot < /proc/sys/kernel/random/boot_id; printf '%s\\n' \"$boot\"; \
         cat /proc/modules 2>/dev/null; echo {KALLSYMS_FOLLOWS}; \
         case \"$boot\" in {pattern}) ;; *) cat /proc/kallsyms; echo {MODULES_AGAIN}; \
         cat /proc/modules 2>/dev/null; true ;; esac"
    )
}

/// The kernel's symbols as the container sees them (`listing`: what `kernel_listing_script`
/// printed): the copy kept for its boot when that names every kernel frame, else
/// /proc/kallsyms read now (and kept for the next fold).
pub(super) async fn kernel_symbols(
    shell: &impl ContainerShell,
    cache: &Path,
    raw: &RawProfile,
    listing: Option<String>,
    preloaded: &KernelPreload,
) -> Option<Kallsyms> {
    let mut id = None;
    let mut kept = None;
    if let Some(stdout) = listing {
        let marker = format!("\n{KALLSYMS_FOLLOWS}\n");
        if let Some((head, rest)) = stdout.split_once(&marker) {
            let (boot, modules) = head.split_once('\n').unwrap_or((head, ""));
            id = KernelIdentity::new(boot, modules);
            if let Some((listing, after)) = rest.rsplit_once(&format!("{MODULES_AGAIN}\n")) {
                let unchanged = id
                    .as_ref()
                    .filter(|id| KernelIdentity::new(boot, after).as_ref() == Some(id));
                return parse_and_keep(listing.to_string(), cache, unchanged.cloned()).await;
            }
            kept = match id.as_ref() {
                Some(id) => preloaded.take(cache, id).await,
                None => None,
            };
            if kept.is_none() {
                let (kept_in, wanted) = (cache.to_path_buf(), id.clone());
                kept = tokio::task::spawn_blocking(move || {
                    kernel_cache::load(&kept_in, wanted.as_ref()?, Source::Container)
                })
                .await
                .ok()
                .flatten();
            }
            if kept.as_ref().is_some_and(|k| raw.kernel_covered_by(k)) {
                return kept;
            }
        }
    }
    // No shell in the container, or the kept copy does not cover every frame (it still
    // names what it covers if the read fails).
    match shell.run(&["cat", "/proc/kallsyms"]).await {
        Ok(out) if out.success() => parse_and_keep(out.stdout, cache, id).await.or(kept),
        _ => kept,
    }
}

/// Parses kallsyms text read now and keeps it for the rest of the boot (off the async
/// threads: megabytes to parse and write).
async fn parse_and_keep(
    text: String,
    cache: &Path,
    id: Option<KernelIdentity>,
) -> Option<Kallsyms> {
    let cache = cache.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let kallsyms = Kallsyms::parse(text)?;
        if let Some(id) = &id {
            // A copy that cannot be kept only costs the next fold a live read.
            let _ = kernel_cache::save(&cache, id, Source::Container, &kallsyms);
        }
        Some(kallsyms)
    })
    .await
    .ok()
    .flatten()
}
