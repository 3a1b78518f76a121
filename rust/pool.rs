//! The crate's own rayon thread pool, rebuilt in a forked child.
//!
//! `fork()` copies only the calling thread: a child of a process that had used a thread pool
//! inherits the pool's bookkeeping but none of its threads, and the first parallel call waits
//! forever for workers that do not exist (this is what made a `multiprocessing` child started
//! with `fork` hang). So the pool is owned by the crate and tagged with the process id: when
//! [`get`] sees another pid, it builds a fresh pool for this process and forgets the stale one
//! (never dropping it: its threads are gone, and shutting it down would wait on them). The
//! lookup is a single atomic pointer, so no lock can be inherited held across the fork.
//!
//! The pool has `RAYON_NUM_THREADS` threads when set, else one per logical CPU (rayon's
//! default). All parallel work of the bindings runs inside it (see `bindings::run`).

use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};

use rayon::ThreadPool;

use crate::error::{CoreError, CoreResult};

/// A pool and the process it was built in.
struct Entry {
    pid: u32,
    pool: ThreadPool,
}

/// The current entry; entries are leaked, never freed (one per process that used the pool).
static CURRENT: AtomicPtr<Entry> = AtomicPtr::new(ptr::null_mut());

fn build() -> CoreResult<ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .thread_name(|i| format!("stagecut-{i}"))
        .build()
        .map_err(|e| CoreError::Internal(format!("cannot start the thread pool: {e}")))
}

/// The pool of this process, built on first use (and again after a fork).
pub fn get() -> CoreResult<&'static ThreadPool> {
    let pid = std::process::id();
    loop {
        let cur = CURRENT.load(Ordering::Acquire);
        // SAFETY: a non-null pointer in CURRENT comes from `Box::into_raw` below and is never
        // freed, so it is valid for the rest of the process (and of any forked child).
        if let Some(e) = unsafe { cur.as_ref() } {
            if e.pid == pid {
                return Ok(&e.pool);
            }
        }
        let fresh = Box::into_raw(Box::new(Entry {
            pid,
            pool: build()?,
        }));
        match CURRENT.compare_exchange(cur, fresh, Ordering::AcqRel, Ordering::Acquire) {
            // the entry replaced (if any) belongs to the parent process: leaked on purpose
            Ok(_) => {
                // SAFETY: just published, never freed (see above)
                return Ok(unsafe { &(*fresh).pool });
            }
            Err(_) => {
                // another thread of this process installed a pool first: use that one; ours
                // was never shared and its threads are alive, so it can be dropped
                // SAFETY: `fresh` came from `Box::into_raw` and was never published
                drop(unsafe { Box::from_raw(fresh) });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_is_built_once_per_process() {
        let a = get().unwrap() as *const ThreadPool;
        let b = get().unwrap() as *const ThreadPool;
        assert_eq!(a, b);
        let n = get().unwrap().current_num_threads();
        assert!(n >= 1);
        // work runs on the pool's threads
        let name = get()
            .unwrap()
            .install(|| std::thread::current().name().map(str::to_owned));
        assert!(name.unwrap_or_default().starts_with("stagecut-"));
    }
}
