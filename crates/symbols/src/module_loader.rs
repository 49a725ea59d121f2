//! Module symbols read on threads beside the caller: a native fold hands each binary
//! over as its perf.data read first meets it, and takes every module, read or failed, at
//! the end.

use crate::module::{ModuleFiles, ModuleSymbols};
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};

/// The modules a `Loader` read, and the error of each file that did not read.
pub struct Loaded<K> {
    pub modules: Vec<(K, ModuleSymbols)>,
    pub failed: Vec<(K, String)>,
}

impl<K> Loaded<K> {
    fn new() -> Self {
        Loaded {
            modules: Vec::new(),
            failed: Vec::new(),
        }
    }

    fn push(&mut self, key: K, read: Result<ModuleSymbols, String>) {
        match read {
            Ok(module) => self.modules.push((key, module)),
            Err(e) => self.failed.push((key, e)),
        }
    }
}

/// One module's symbols; with `dwarf` (inline frames will be asked for) its DWARF opened
/// too, which on a big binary takes a while.
fn read_module(files: &ModuleFiles, dwarf: bool) -> Result<ModuleSymbols, String> {
    let read = ModuleSymbols::from_files(files);
    if let (true, Ok(module)) = (dwarf, &read) {
        module.open_dwarf();
    }
    read
}

/// Module symbols read on a thread of their own while the caller goes on: a native fold
/// hands each file over when its read first meets a frame in it, so a big library's
/// symbols are read while the rest of the perf.data is, and `finish` takes what was read
/// (the caller's thread reading what still waits, beside the loader's).
pub struct Loader<K> {
    shared: Arc<Shared<K>>,
    worker: Option<std::thread::JoinHandle<()>>,
    dwarf: bool,
}

struct Shared<K> {
    queue: Mutex<Queue<K>>,
    waiting: Condvar,
}

/// Where a module's files are: found on the loader's thread (finding a stripped
/// library's debug file reads its build-id).
type FindFiles = Box<dyn FnOnce() -> ModuleFiles + Send>;

struct Queue<K> {
    files: VecDeque<(K, FindFiles)>,
    closed: bool,
    loaded: Loaded<K>,
}

impl<K: Send + 'static> Loader<K> {
    /// With `dwarf` (inline frames will be asked for), each module's DWARF is opened as
    /// it is read, which on a big binary takes a while.
    pub fn new(dwarf: bool) -> Self {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                files: VecDeque::new(),
                closed: false,
                loaded: Loaded::new(),
            }),
            waiting: Condvar::new(),
        });
        let for_worker = Arc::clone(&shared);
        // Without a thread of its own, `finish` reads everything.
        let worker = std::thread::Builder::new()
            .name("symbols".into())
            .spawn(move || for_worker.work(dwarf))
            .ok();
        Loader {
            shared,
            worker,
            dwarf,
        }
    }

    /// Queues one module's files.
    pub fn load(&self, key: K, files: impl Into<ModuleFiles>) {
        let files = files.into();
        self.load_found(key, move || files);
    }

    /// Queues one module whose files `find` says, asked on the loader's thread.
    pub fn load_found(&self, key: K, find: impl FnOnce() -> ModuleFiles + Send + 'static) {
        let mut queue = self.shared.queue.lock().expect("module queue");
        queue.files.push_back((key, Box::new(find)));
        drop(queue);
        self.shared.waiting.notify_one();
    }

    /// Every queued module, read: what still waits is read on the caller's thread and,
    /// where there are more cores than the two, on threads beside it.
    pub fn finish(mut self) -> Loaded<K> {
        self.shared.close();
        let waiting = self.shared.queue.lock().expect("module queue").files.len();
        let helpers = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .saturating_sub(2)
            .min(waiting.saturating_sub(2));
        let (shared, dwarf) = (&self.shared, self.dwarf);
        std::thread::scope(|scope| {
            for _ in 0..helpers {
                scope.spawn(|| shared.work(dwarf));
            }
            shared.work(dwarf);
        });
        if let Some(worker) = self.worker.take() {
            // A module whose read panicked is in neither list: end as a read on this
            // thread would have, not with its frames left unnamed and no reason said.
            if let Err(panic) = worker.join() {
                std::panic::resume_unwind(panic);
            }
        }
        let mut queue = self.shared.queue.lock().expect("module queue");
        std::mem::replace(&mut queue.loaded, Loaded::new())
    }
}

impl<K> Drop for Loader<K> {
    /// A loader dropped unfinished (the read failed) lets its thread end, with what it
    /// had not begun left unread.
    fn drop(&mut self) {
        if let Ok(mut queue) = self.shared.queue.lock() {
            queue.files.clear();
        }
        self.shared.close();
    }
}

impl<K> Shared<K> {
    fn close(&self) {
        self.queue.lock().expect("module queue").closed = true;
        self.waiting.notify_all();
    }

    /// Reads queued modules until the queue is empty and closed.
    fn work(&self, dwarf: bool) {
        loop {
            let next = {
                let mut queue = self.queue.lock().expect("module queue");
                loop {
                    if let Some(next) = queue.files.pop_front() {
                        break Some(next);
                    }
                    if queue.closed {
                        break None;
                    }
                    queue = self.waiting.wait(queue).expect("module queue");
                }
            };
            let Some((key, find)) = next else { return };
            let read = read_module(&find(), dwarf);
            self.queue
                .lock()
                .expect("module queue")
                .loaded
                .push(key, read);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::module::SymbolKind;
    use std::path::Path;

    /// Files handed over one by one while the caller goes on, some of them unreadable:
    /// `finish` has every one, read or failed, whenever it was queued.
    #[test]
    fn a_loader_reads_files_queued_before_and_after_it_starts_and_names_each_failure() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/go");
        let loader = Loader::new(true);
        loader.load("a", dir.join("tiny-stripped"));
        let missing = dir.join("no-such-file");
        loader.load_found("c", move || ModuleFiles::from(missing));
        std::thread::sleep(std::time::Duration::from_millis(20));
        loader.load("b", dir.join("tiny-pie-stripped"));
        loader.load("d", dir.join("tiny-full.nm"));
        // This test's own executable: a debug build, with DWARF.
        loader.load("e", std::env::current_exe().unwrap());
        let loaded = loader.finish();
        let mut read: Vec<_> = loaded.modules.iter().map(|(k, m)| (*k, m.kind)).collect();
        read.sort_by_key(|(k, _)| *k);
        assert_eq!(
            read,
            [
                ("a", SymbolKind::Gopclntab),
                ("b", SymbolKind::Gopclntab),
                ("e", SymbolKind::Dwarf)
            ]
        );
        // Asked for inline frames: the DWARF is opened on the loading threads.
        let (_, own) = loaded.modules.iter().find(|(k, _)| *k == "e").unwrap();
        assert!(own.dwarf_opened());
        let mut failed: Vec<_> = loaded
            .failed
            .iter()
            .map(|(k, e)| (*k, e.as_str()))
            .collect();
        failed.sort();
        assert_eq!(failed.len(), 2);
        assert!(
            failed[0].0 == "c" && failed[0].1.contains("no-such-file"),
            "{failed:?}"
        );
        assert!(
            failed[1].0 == "d" && failed[1].1.contains("not an ELF file"),
            "{failed:?}"
        );
        // One never finished lets its thread go.
        let dropped: Loader<&str> = Loader::new(false);
        dropped.load("a", dir.join("tiny-stripped"));
        drop(dropped);
    }
}
