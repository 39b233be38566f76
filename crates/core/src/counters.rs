//! The counter tables: every counter declared once with Varnish's name,
//! kind, unit and description. `MAIN.*` counters are process-wide
//! atomics; the per-store (`SMA.<store>.*`) and per-backend
//! (`VBE.<vcl>.<backend>.*`) ones are blocks of atomics their owners
//! hold. The shared-memory segment that tools read is built from these
//! tables.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Whether a value only grows, goes up and down, or is a set of bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CounterKind {
    Counter,
    Gauge,
    Bitmap,
}

impl CounterKind {
    /// As the segment and `lacquer stat -j` spell it.
    pub fn name(self) -> &'static str {
        match self {
            CounterKind::Counter => "counter",
            CounterKind::Gauge => "gauge",
            CounterKind::Bitmap => "bitmap",
        }
    }
}

/// What one unit of a counter is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Count,
    Bytes,
    Seconds,
    Bits,
}

impl Unit {
    /// As the segment and `lacquer stat -j` spell it.
    pub fn name(self) -> &'static str {
        match self {
            Unit::Count => "count",
            Unit::Bytes => "bytes",
            Unit::Seconds => "seconds",
            Unit::Bits => "bits",
        }
    }
}

/// The static description of one counter.
#[derive(Debug)]
pub struct CounterSpec {
    pub name: &'static str,
    pub kind: CounterKind,
    pub unit: Unit,
    pub doc: &'static str,
}

macro_rules! unit_of {
    () => {
        Unit::Count
    };
    ($unit:ident) => {
        Unit::$unit
    };
}

/// Declares a table of counters: an enum naming each, the static
/// descriptions in that order, and a block of atomics holding the values.
macro_rules! counter_table {
    (
        $(#[$meta:meta])* enum $id:ident; table $table:ident; block $block:ident;
        $( $name:ident : $kind:ident $(($unit:ident))?, $doc:literal; )*
    ) => {
        $(#[$meta])*
        #[allow(non_camel_case_types)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        #[repr(usize)]
        pub enum $id { $( $name, )* }

        /// The descriptions, in the enum's order.
        pub static $table: &[CounterSpec] = &[
            $( CounterSpec {
                name: stringify!($name),
                kind: CounterKind::$kind,
                unit: unit_of!($($unit)?),
                doc: $doc,
            }, )*
        ];

        /// The values, one atomic per counter of the table.
        #[derive(Debug)]
        pub struct $block {
            values: [AtomicU64; [$( stringify!($name) ),*].len()],
        }

        impl $block {
            pub const fn new() -> Self {
                $block { values: [const { AtomicU64::new(0) }; [$( stringify!($name) ),*].len()] }
            }

            /// Adds one.
            #[inline]
            pub fn inc(&self, c: $id) {
                self.values[c as usize].fetch_add(1, Ordering::Relaxed);
            }

            /// Adds `n`.
            #[inline]
            pub fn add(&self, c: $id, n: u64) {
                if n != 0 {
                    self.values[c as usize].fetch_add(n, Ordering::Relaxed);
                }
            }

            /// Subtracts one from a gauge.
            #[inline]
            pub fn dec(&self, c: $id) {
                self.values[c as usize].fetch_sub(1, Ordering::Relaxed);
            }

            /// Subtracts `n` from a gauge.
            #[inline]
            pub fn sub(&self, c: $id, n: u64) {
                if n != 0 {
                    self.values[c as usize].fetch_sub(n, Ordering::Relaxed);
                }
            }

            /// Sets a value outright (a gauge, `uptime`, a bitmap).
            pub fn set(&self, c: $id, v: u64) {
                self.values[c as usize].store(v, Ordering::Relaxed);
            }

            /// Reads a value.
            pub fn get(&self, c: $id) -> u64 {
                self.values[c as usize].load(Ordering::Relaxed)
            }

            /// Copies every value, in table order, onto `out`.
            pub fn snapshot(&self, out: &mut Vec<u64>) {
                out.extend(self.values.iter().map(|v| v.load(Ordering::Relaxed)));
            }

            /// Adds `n` (wrapping, so that a gauge's decrements add up
            /// across blocks) to a value only this thread writes: a plain
            /// load and store, no locked instruction.
            #[inline]
            #[allow(dead_code)]
            fn bump(&self, c: $id, n: u64) {
                let v = &self.values[c as usize];
                v.store(v.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
            }

            /// Adds every value, wrapping, onto `out` (blocks counted apart
            /// and summed when read, as `MAIN`'s and a backend's are).
            pub fn sum_into(&self, out: &mut [u64]) {
                for (o, v) in out.iter_mut().zip(self.values.iter()) {
                    *o = o.wrapping_add(v.load(Ordering::Relaxed));
                }
            }

            /// Adds every value of `other` into this block.
            #[allow(dead_code)]
            fn absorb(&self, other: &Self) {
                for (v, o) in self.values.iter().zip(other.values.iter()) {
                    v.fetch_add(o.load(Ordering::Relaxed), Ordering::Relaxed);
                }
            }
        }

        impl Default for $block {
            fn default() -> Self {
                Self::new()
            }
        }
    };
}

counter_table! {
    /// One identifier per `MAIN` counter.
    enum Counter; table MAIN; block CounterShard;
    uptime: Counter(Seconds), "Seconds the daemon has been running.";
    sess_conn: Counter, "Client connections accepted.";
    sess_fail: Counter, "Client connections that could not be accepted.";
    sess_closed: Counter, "Client connections closed.";
    sess_closed_err: Counter, "Client connections closed because of an error.";
    client_req: Counter, "Good client requests received.";
    client_req_400: Counter, "Client requests rejected as malformed (400).";
    client_req_414: Counter, "Client requests rejected for an overlong URL (414).";
    client_req_417: Counter, "Client requests rejected for an unsupported Expect (417).";
    client_req_431: Counter, "Client requests rejected for oversized headers (431).";
    cache_hit: Counter, "Requests answered from a cached object.";
    cache_hit_grace: Counter, "Cache hits delivered from an object past its TTL but within grace.";
    cache_hitpass: Counter, "Requests that found a hit-for-pass object.";
    cache_hitmiss: Counter, "Requests that found a hit-for-miss object.";
    cache_miss: Counter, "Requests that missed the cache.";
    backend_conn: Counter, "Backend connections opened.";
    backend_unhealthy: Counter, "Backend fetches not attempted because the backend was sick.";
    backend_busy: Counter, "Backend fetches not attempted because the backend was at max_connections.";
    backend_wait: Counter, "Backend fetches that waited in line for a connection at max_connections.";
    backend_wait_fail: Counter, "Backend fetches that waited for a connection and did not get one in time.";
    backend_fail: Counter, "Backend connections that could not be opened.";
    backend_reuse: Counter, "Backend connections reused from the pool.";
    backend_recycle: Counter, "Backend connections returned to the pool.";
    backend_req: Counter, "Backend requests made.";
    backend_retry: Counter, "Backend requests retried on a fresh connection after a reused one failed.";
    fetch_head: Counter, "Fetches of HEAD requests without a body.";
    fetch_length: Counter, "Fetches with a Content-Length body.";
    fetch_chunked: Counter, "Fetches with a chunked body.";
    fetch_eof: Counter, "Fetches with a body read until the connection closed.";
    fetch_bad: Counter, "Fetches whose body framing could not be understood.";
    fetch_none: Counter, "Fetches without a body.";
    fetch_1xx: Counter, "Fetches with a 1xx status, which has no body.";
    fetch_204: Counter, "Fetches with a 204 status, which has no body.";
    fetch_304: Counter, "Fetches with a 304 status, which has no body.";
    fetch_failed: Counter, "Fetches that failed.";
    esi_errors: Counter, "ESI parse errors.";
    esi_warnings: Counter, "ESI parse warnings.";
    esi_req: Counter, "ESI sub-requests run.";
    n_gzip: Counter, "Gzip operations.";
    n_gunzip: Counter, "Gunzip operations.";
    n_test_gunzip: Counter, "Test gunzip operations (checks of gzip bodies stored as they came).";
    n_brotli: Counter, "Brotli operations (renditions made, bodies and ESI pages compressed).";
    n_unbrotli: Counter, "Brotli decompressions (bodies stored br delivered to clients that do not take it, or inflated on their way in).";
    n_zstd: Counter, "Zstd operations (renditions made, bodies and ESI pages compressed).";
    n_unzstd: Counter, "Zstd decompressions (bodies stored zstd delivered to clients that do not take it, or inflated on their way in).";
    n_compress_fail: Counter, "br and zstd renditions given up: the body would not decompress, the rendition was no smaller, or the store had no room for it.";
    g_renditions: Gauge, "br and zstd renditions held beside cached objects.";
    fetch_no_thread: Counter, "Fetches that could not be started.";
    s_sess: Counter, "Client sessions.";
    n_purges: Counter, "Purge operations executed.";
    n_obj_purged: Counter, "Objects removed by purges.";
    s_pipe_hdrbytes: Counter(Bytes), "Request header bytes sent on piped connections.";
    s_pipe_in: Counter(Bytes), "Bytes piped from clients to backends.";
    s_pipe_out: Counter(Bytes), "Bytes piped from backends to clients.";
    sc_tx_pipe: Counter, "Sessions closed after a pipe ended.";
    sc_vcl_failure: Counter, "Sessions closed because VCL failed.";
    vcl_fail: Counter, "VCL methods that failed.";
    n_vcl: Gauge, "VCL programs loaded.";
    n_vcl_avail: Gauge, "VCL programs available for use.";
    n_backend: Gauge, "Backends defined by the loaded VCL programs.";
    s_pipe: Counter, "Requests piped to a backend.";
    s_pass: Counter, "Requests passed to a backend.";
    s_fetch: Counter, "Backend fetches.";
    s_bgfetch: Counter, "Background fetches started to refresh an object in grace.";
    s_synth: Counter, "Synthetic responses made.";
    s_req_hdrbytes: Counter(Bytes), "Request header bytes received.";
    s_req_bodybytes: Counter(Bytes), "Request body bytes received.";
    s_resp_hdrbytes: Counter(Bytes), "Response header bytes sent.";
    s_resp_bodybytes: Counter(Bytes), "Response body bytes sent.";
    n_object: Gauge, "Objects in the cache.";
    n_objectcore: Gauge, "Object cores (objects and markers) in the cache.";
    n_objecthead: Gauge, "Object heads (distinct hash keys) in the cache.";
    n_expired: Counter, "Objects removed because they expired.";
    n_lru_nuked: Counter, "Objects evicted to make room for new ones.";
    n_lru_moved: Counter, "Objects moved to the front of the LRU list.";
    n_lru_limited: Counter, "Allocations that failed because nuke_limit was reached.";
    bans: Gauge, "Bans in the ban list, completed ones included.";
    bans_completed: Gauge, "Bans marked completed: tested against every older object, or superseded by a newer identical ban.";
    bans_obj: Gauge, "Bans that test only obj.* fields, which the ban lurker can test.";
    bans_req: Gauge, "Bans that test req.* fields, which only lookups can test.";
    bans_added: Counter, "Bans added to the ban list.";
    bans_deleted: Counter, "Bans deleted from the ban list.";
    bans_tested: Counter, "Objects tested against bans during lookup.";
    bans_obj_killed: Counter, "Objects killed by bans during lookup.";
    bans_lurker_tested: Counter, "Objects tested against bans by the ban lurker.";
    bans_tests_tested: Counter, "Single ban conditions tested against objects during lookup.";
    bans_lurker_tests_tested: Counter, "Single ban conditions tested against objects by the ban lurker.";
    bans_lurker_obj_killed: Counter, "Objects killed by the ban lurker.";
    bans_lurker_obj_killed_cutoff: Counter, "Objects killed by the ban lurker to keep the number of bans below ban_cutoff.";
    bans_dups: Counter, "Bans superseded by newer identical bans.";
    bans_lurker_contention: Counter, "Times the ban lurker waited for a shard that lookups held.";
    busy_sleep: Counter, "Requests that waited on a busy object.";
    busy_wakeup: Counter, "Requests woken after waiting on a busy object.";
    losthdr: Counter, "Headers dropped because http_max_hdr was reached.";
    sc_rem_close: Counter, "Sessions closed by the client.";
    sc_req_close: Counter, "Sessions closed because the client asked.";
    sc_req_http10: Counter, "Sessions closed because the request was HTTP/1.0 without keep-alive.";
    sc_rx_bad: Counter, "Sessions closed after a malformed request.";
    sc_rx_body: Counter, "Sessions closed after a failure reading the request body.";
    sc_rx_junk: Counter, "Sessions closed after bytes that were not a request.";
    sc_rx_overflow: Counter, "Sessions closed after an oversized request.";
    sc_rx_timeout: Counter, "Sessions closed past timeout_idle with part of a request received, or a handshake unfinished.";
    sc_tx_error: Counter, "Sessions closed after a write to the client failed.";
    sc_tx_eof: Counter, "Sessions closed because the response ended at connection close.";
    sc_resp_close: Counter, "Sessions closed because the response asked for it.";
    sc_overload: Counter, "Sessions closed because resources were exhausted.";
    sc_range_short: Counter, "Sessions closed because a body was shorter than announced.";
    sc_send_timeout: Counter, "Sessions closed because delivery exceeded send_timeout.";
    sc_req_http20: Counter, "Sessions closed after an HTTP/2 request on a connection that does not speak it (not counted: such a preface gets a 405 from the built-in VCL).";
    sc_rx_close_idle: Counter, "Sessions closed idle past timeout_idle: nothing of a next request came.";
    sc_pipe_overflow: Counter, "Sessions closed because a pipe overflowed (never: pipes are bounded by their buffers).";
    sess_readahead: Counter, "Requests read from bytes already received with the one before (pipelined).";
    sess_herd: Counter, "Keep-alive sessions that waited longer than timeout_linger for their next request.";
    sess_queued: Counter, "Requests that waited for a place among those at work (thread_pool_max).";
    sess_dropped: Counter, "Sessions dropped at their first request: no place and the queue full (thread_queue_limit).";
    req_dropped: Counter, "Later requests of a session dropped: no place and the queue full.";
    sess_fail_econnaborted: Counter, "Accepts that failed because the connection was aborted before it was accepted.";
    sess_fail_eintr: Counter, "Accepts that failed because they were interrupted.";
    sess_fail_emfile: Counter, "Accepts that failed because the process had no descriptor left.";
    sess_fail_ebadf: Counter, "Accepts that failed on a bad listen socket.";
    sess_fail_enomem: Counter, "Accepts that failed for want of memory.";
    sess_fail_other: Counter, "Accepts that failed for any other reason.";
    tls_handshakes: Counter, "TLS handshakes completed on client connections.";
    tls_handshake_fail: Counter, "TLS handshakes refused or broken off (a garbage ClientHello, no common protocol or cipher, a server name with no certificate under sni-nomatch-abort).";
    tls_handshake_timeout: Counter, "TLS handshakes not done within the -A file's handshake timeout.";
    sc_rapid_reset: Counter, "HTTP/2 and HTTP/3 sessions closed for resetting streams too often too soon after opening them (h2_rapid_reset_limit within h2_rapid_reset_period, h3_rapid_reset_limit within h3_rapid_reset_period).";
    sc_calm: Counter, "HTTP/2 sessions told to enhance their calm and closed: floods of SETTINGS, PING, PRIORITY, empty DATA or CONTINUATION frames.";
    req_reset: Counter, "HTTP/2 requests reset by the client before their response was sent whole.";
    sess_h2: Counter, "Sessions that spoke HTTP/2 (by ALPN or by prior knowledge).";
    sess_h3: Counter, "QUIC connections that spoke HTTP/3 (their handshake done). Lacquer-only.";
    sess_h3_fail: Counter, "QUIC connections whose handshake failed or timed out. Lacquer-only.";
    h3_retry: Counter, "QUIC connection attempts answered with a Retry, to validate the client's address first. Lacquer-only.";
    h3_refused: Counter, "QUIC connection attempts refused because the listener had h3_max_connections already. Lacquer-only.";
    h3_streams: Counter, "HTTP/3 request streams taken. Lacquer-only.";
    h3_reset: Counter, "HTTP/3 request streams given up before their response was sent whole. Lacquer-only.";
    h3_early: Counter, "HTTP/3 requests taken before their connection's handshake completed (0-RTT early data). Lacquer-only.";
    h3_early_held: Counter, "Of those, the requests that were not safe (not GET, HEAD or OPTIONS without a body) and waited for the handshake. Lacquer-only.";
    h3_early_refused: Counter, "Of those held, the requests answered 425 (Too Early) because the handshake did not complete within h3_idle_timeout. Lacquer-only.";
    h3_lost_packets: Counter, "QUIC packets of HTTP/3 connections found lost (and sent again), counted as each connection ends. Lacquer-only.";
    sess_task_created: Counter, "Session tasks started: connections that found no idle session task on their worker.";
    sess_task_reused: Counter, "Connections served by a session task kept idle from an earlier connection (at most thread_pool_min a worker are kept).";
    sess_rebalanced: Counter, "Connections taken from the accept queue of a worker that fell behind (worker_stall_limit) and served by another worker. Lacquer-only.";
    sess_task_idle: Gauge, "Session tasks kept idle for the next connections.";
    sess_tasks: Gauge, "Session tasks: serving a connection or kept idle for the next one.";
    transit_stored: Counter(Bytes), "Bytes of uncacheable responses (passes, hit-for-miss, hit-for-pass) kept whole on their way to the client (transit_buffer 0, or an ESI page).";
    transit_buffered: Counter(Bytes), "Bytes of uncacheable responses passed on as the client took them, never more than transit_buffer ahead of it.";
    http1_iovs_flush: Counter, "Extra writes a response needed because its pieces outnumbered what one write gathers (16).";
    n_req: Gauge, "Client requests being handled now, ESI includes too (MEMPOOL.req0.live).";
    n_bereq: Gauge, "Backend requests under way now, fetches and pipes (MEMPOOL.busyobj.live).";
    tls_acme_issued: Counter, "Certificates obtained from an ACME server and put in force.";
    tls_acme_fail: Counter, "ACME orders that failed (tried again after the section's retry time).";
    tls_acme_challenges: Counter, "ACME validations answered: TLS-ALPN-01 handshakes and HTTP-01 requests.";
    client_resp_500: Counter, "Deliveries that failed for want of workspace (never: there is no workspace to run out of).";
    n_pipe: Gauge, "Pipes open now.";
    pipe_limited: Counter, "Pipes refused at a limit (never: pipes are not limited in number).";
    beresp_uncacheable: Counter, "Backend responses kept only for the request that fetched them (uncacheable).";
    beresp_shortlived: Counter, "Backend responses stored in Transient because they live shorter than shortlived.";
    busy_killed: Counter, "Requests given up while waiting on a busy object (never: waiters follow the fetch).";
    exp_mailed: Counter, "Objects handed to expiry.";
    exp_received: Counter, "Objects expiry took in (handed over in place, so equal to exp_mailed).";
    hcb_nolock: Counter, "Lookups without the index lock (never: the index is sharded, not Varnish's critbit tree).";
    hcb_lock: Counter, "Lookups that took the index lock (never, as hcb_nolock).";
    hcb_insert: Counter, "Critbit inserts (never, as hcb_nolock; see n_objecthead).";
    n_vampireobject: Gauge, "Unresurrected objects: records a restart left asleep in the persistent stores, not yet built into objects (each is built when its key is first asked for).";
    bans_persisted_bytes: Gauge(Bytes), "Bytes of the ban list kept for a persistent store (never).";
    bans_persisted_fragmentation: Gauge(Bytes), "Unused bytes of that list (never).";
    threads: Gauge, "Threads at work: the workers and the threads the runtimes start (blocking work, the control runtime).";
    threads_created: Counter, "Threads started.";
    threads_destroyed: Counter, "Threads stopped (a runtime's idle blocking threads end after a while).";
    threads_failed: Counter, "Worker threads that could not be started.";
    threads_limited: Counter, "Times a request found every place taken (thread_pools x thread_pool_max).";
    thread_queue_len: Gauge, "Requests waiting for a place among those at work.";
    pools: Gauge, "Thread pools (one runtime).";
    summs: Counter, "Times the workers' counters were summed.";
    vmods: Gauge, "VMODs imported by loaded programs.";
    n_vcl_discard: Gauge, "Programs discarded but not yet let go (never: a discarded program goes when its last request ends, unseen).";
    ws_backend_overflow: Counter, "Backend workspace overflows (workspace_backend).";
    ws_client_overflow: Counter, "Client workspace overflows (workspace_client).";
    ws_thread_overflow: Counter, "Thread workspace overflows (never).";
    ws_session_overflow: Counter, "Session workspace overflows (never).";
    shm_records: Counter, "Log records written.";
    shm_writes: Counter, "Batches of records written to the log ring.";
    shm_flushes: Counter, "Batches written because a worker's batch was full.";
    shm_cont: Counter, "Batches that waited for another writer of the ring.";
    shm_cycles: Counter, "Times the log ring wrapped around.";
    shm_bytes: Counter(Bytes), "Bytes written to the log ring.";
}

/// The `MAIN` counters, counted by each thread in a block of its own and
/// summed when read (as Varnish's workers keep their own counts and fold
/// them into the shared ones): counting a request writes no memory
/// another thread writes. `set` is for values only ever set (uptime,
/// numbers of programs); a thread that ends leaves its counts behind.
pub struct Counters {
    /// What `set` stores, what ended threads counted, and what is counted
    /// while a thread is ending.
    base: CounterShard,
    /// The blocks of the threads that count.
    shards: Mutex<Vec<Arc<CounterShard>>>,
}

/// A thread's block, given back to [`COUNTERS`] when the thread ends.
struct ThreadShard(Arc<CounterShard>);

impl Drop for ThreadShard {
    fn drop(&mut self) {
        COUNTERS.retire(&self.0);
    }
}

thread_local! {
    static SHARD: ThreadShard = ThreadShard(COUNTERS.register());
}

impl Counters {
    pub const fn new() -> Self {
        Counters {
            base: CounterShard::new(),
            shards: Mutex::new(Vec::new()),
        }
    }

    fn shards(&self) -> std::sync::MutexGuard<'_, Vec<Arc<CounterShard>>> {
        self.shards.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn register(&self) -> Arc<CounterShard> {
        let shard = Arc::new(CounterShard::new());
        self.shards().push(shard.clone());
        shard
    }

    fn retire(&self, shard: &Arc<CounterShard>) {
        let mut shards = self.shards();
        self.base.absorb(shard);
        shards.retain(|s| !Arc::ptr_eq(s, shard));
    }

    #[inline]
    fn bump(&self, c: Counter, n: u64) {
        // A thread that is ending counts into the shared block.
        if SHARD.try_with(|s| s.0.bump(c, n)).is_err() {
            self.base.add(c, n);
        }
    }

    /// Adds one.
    #[inline]
    pub fn inc(&self, c: Counter) {
        self.bump(c, 1);
    }

    /// Adds `n`.
    #[inline]
    pub fn add(&self, c: Counter, n: u64) {
        if n != 0 {
            self.bump(c, n);
        }
    }

    /// Subtracts one from a gauge.
    #[inline]
    pub fn dec(&self, c: Counter) {
        self.bump(c, 1u64.wrapping_neg());
    }

    /// Subtracts `n` from a gauge.
    #[inline]
    pub fn sub(&self, c: Counter, n: u64) {
        if n != 0 {
            self.bump(c, n.wrapping_neg());
        }
    }

    /// Adds one to a gauge until the guard is dropped: something that
    /// is open (a pipe, a session task) for as long as it lives.
    pub fn hold(&'static self, c: Counter) -> Held {
        self.inc(c);
        Held(self, c)
    }

    /// Sets a value outright (one that is only ever set).
    pub fn set(&self, c: Counter, v: u64) {
        self.base.set(c, v);
    }

    /// Reads a value: the sum over every thread.
    pub fn get(&self, c: Counter) -> u64 {
        let mut all = vec![0u64; MAIN.len()];
        self.sum_into(&mut all);
        all[c as usize]
    }

    /// Copies every value, in table order, onto `out` (a summing that
    /// `summs` counts).
    pub fn snapshot(&self, out: &mut Vec<u64>) {
        self.base.add(Counter::summs, 1);
        let mut all = vec![0u64; MAIN.len()];
        self.sum_into(&mut all);
        out.extend_from_slice(&all);
    }

    fn sum_into(&self, out: &mut [u64]) {
        let shards = self.shards();
        self.base.sum_into(out);
        for shard in shards.iter() {
            shard.sum_into(out);
        }
    }
}

/// One in a gauge, given back when dropped ([`Counters::hold`]).
#[must_use = "the gauge goes down again when the guard is dropped"]
pub struct Held(&'static Counters, Counter);

impl Drop for Held {
    fn drop(&mut self) {
        self.0.dec(self.1);
    }
}

impl Default for Counters {
    fn default() -> Self {
        Self::new()
    }
}

/// The process-wide `MAIN` counters.
pub static COUNTERS: Counters = Counters::new();

counter_table! {
    /// One identifier per `SMA.<store>` counter.
    enum StoreCounter; table SMA; block StoreCounters;
    c_req: Counter, "Allocations asked of the store.";
    c_fail: Counter, "Allocations the store could not satisfy.";
    c_bytes: Counter(Bytes), "Bytes allocated from the store.";
    c_freed: Counter(Bytes), "Bytes given back to the store.";
    g_alloc: Gauge, "Allocations held now.";
    g_bytes: Gauge(Bytes), "Bytes held now.";
    g_space: Gauge(Bytes), "Bytes still available (0 for an unbounded store).";
}

counter_table! {
    /// One identifier per `SMF.<store>` counter (a `file` store): the
    /// seven of `SMA`, in the same order, then the free list's.
    enum FileCounter; table SMF; block FileCounters;
    c_req: Counter, "Allocations asked of the store.";
    c_fail: Counter, "Allocations the store could not satisfy.";
    c_bytes: Counter(Bytes), "Bytes allocated from the store.";
    c_freed: Counter(Bytes), "Bytes given back to the store.";
    g_alloc: Gauge, "Allocations held now.";
    g_bytes: Gauge(Bytes), "Bytes held now.";
    g_space: Gauge(Bytes), "Bytes still available.";
    g_smf: Gauge, "Extents of the file, held and free.";
    g_smf_frag: Gauge, "Free extents shorter than 16 granules.";
    g_smf_large: Gauge, "Free extents of 16 granules or more.";
}

counter_table! {
    /// One identifier per `SMP.<store>` counter (a `persistent` store):
    /// the seven of `SMA`, in the same order, then the log's.
    enum PersistCounter; table SMP; block PersistCounters;
    c_req: Counter, "Allocations asked of the store.";
    c_fail: Counter, "Allocations the store could not satisfy.";
    c_bytes: Counter(Bytes), "Bytes allocated from the store.";
    c_freed: Counter(Bytes), "Bytes given back to the store.";
    g_alloc: Gauge, "Allocations held now.";
    g_bytes: Gauge(Bytes), "Bytes of the file in segments still in use.";
    g_space: Gauge(Bytes), "Bytes of the file in segments free to write.";
    g_segments: Gauge, "Segments holding objects.";
    c_written: Counter(Bytes), "Bytes written to the file (records, heads and bodies).";
    c_objects_written: Counter, "Objects written to the file.";
    c_content_written: Counter(Bytes), "Bytes of heads and bodies in the objects written, without the records' framing.";
    c_dropped: Counter, "Objects kept in memory only: the log had no room free of readers.";
    c_recovered: Counter, "Objects recovered from the file at start.";
    c_damaged: Counter, "Records found damaged (at start, or when their object was built) and left out.";
    c_segments_reused: Counter, "Segments reused, evicting what they held.";
    g_asleep: Gauge, "Recovered objects not asked for yet: in the file only, built when first asked for.";
}

counter_table! {
    /// One identifier per `VBE.<vcl>.<backend>` counter.
    enum BackendCounter; table VBE; block BackendCounters;
    happy: Bitmap(Bits), "Recent health probes, newest in the lowest bit, set for a good one.";
    bereq_hdrbytes: Counter(Bytes), "Request header bytes sent to the backend.";
    bereq_bodybytes: Counter(Bytes), "Request body bytes sent to the backend.";
    beresp_hdrbytes: Counter(Bytes), "Response header bytes received from the backend.";
    beresp_bodybytes: Counter(Bytes), "Response body bytes received from the backend.";
    pipe_hdrbytes: Counter(Bytes), "Request header bytes sent on piped connections.";
    pipe_out: Counter(Bytes), "Bytes piped to the backend.";
    pipe_in: Counter(Bytes), "Bytes piped from the backend.";
    conn: Gauge, "Connections in use by fetches now.";
    req: Counter, "Requests sent to the backend.";
    unhealthy: Counter, "Fetches not attempted because the backend was sick.";
    busy: Counter, "Fetches not attempted because the backend was at max_connections.";
    waiting: Gauge, "Fetches waiting in line for a connection at max_connections now.";
    fail: Counter, "Connections that could not be opened.";
    fail_eacces: Counter, "Connections refused locally by EACCES or EPERM.";
    fail_eaddrnotavail: Counter, "Connections that failed with EADDRNOTAVAIL (no local port free).";
    fail_econnrefused: Counter, "Connections the backend refused (ECONNREFUSED).";
    fail_enetunreach: Counter, "Connections that failed with ENETUNREACH.";
    fail_etimedout: Counter, "Connections that timed out (connect_timeout or ETIMEDOUT).";
    fail_other: Counter, "Connections that failed for another reason.";
    helddown: Counter, "Connections not attempted during the backend_local_error_holddown or backend_remote_error_holddown interval after a fundamental connection issue.";
    healthy: Gauge, "1 while the backend is healthy for directors and VCL (its probe or set_health, and not held down), 0 while sick: the up gauge of /metrics (Lacquer's).";
}

counter_table! {
    /// One identifier per `MEMPOOL.<pool>` counter: varnishd's pools of
    /// the memory a session (`sess0`), a request (`req0`) and a backend
    /// request (`busyobj`) work in. Lacquer's are one pool each: a
    /// session's state is a task, kept idle for the next connection; a
    /// request's and a backend request's are made for each and let go.
    enum PoolCounter; table MEMPOOL; block PoolCounters;
    live: Gauge, "In use now.";
    pool: Gauge, "Kept for reuse now (session tasks kept idle; requests are not kept).";
    sz_wanted: Gauge(Bytes), "The size of one.";
    sz_actual: Gauge(Bytes), "The size of one as made (the same).";
    allocs: Counter, "Made, or taken from the pool.";
    frees: Counter, "Given back, to the pool or let go.";
    recycle: Counter, "Taken from the pool.";
    timeout: Counter, "Let go from the pool for their age (never: a kept session task waits until it is needed).";
    toosmall: Counter, "Too small to reuse (never: each pool's are one size).";
    surplus: Counter, "Let go rather than kept: the pool was full.";
    randry: Counter, "Asked of an empty pool, so made anew.";
}

counter_table! {
    /// One identifier per `MGT.*` counter: varnishd's management
    /// process's. Lacquer is one process, so they describe the daemon
    /// itself: it starts once, and a panic ends only its own request.
    enum MgtCounter; table MGT; block MgtCounters;
    uptime: Counter(Seconds), "Seconds the daemon has been running (varnishd: its management process).";
    child_start: Counter, "Times the serving process started: 1, the daemon being one process.";
    child_exit: Counter, "Times the serving process exited cleanly: 0 while the daemon runs.";
    child_stop: Counter, "Times the serving process was stopped: 0 while the daemon runs.";
    child_died: Counter, "Times the serving process died of a signal: 0, it is the daemon.";
    child_dump: Counter, "Times the serving process dumped core: 0, it is the daemon.";
    child_panic: Counter, "Panics caught since start: each ended only its own request (varnishd counts the panics that restarted its child).";
}

counter_table! {
    /// One identifier per `CLUSTER.*` counter: what this node's cluster
    /// did (Lacquer only). Each peer's connections are counted as a
    /// backend's, in `VBE.cluster.<peer>`.
    enum ClusterCounter; table CLUSTER; block ClusterCounters;
    nodes: Gauge, "Nodes that take requests, this one included.";
    nodes_down: Gauge, "Nodes known and judged down.";
    fetch: Counter, "Cache misses answered by the node that owns the object.";
    fetch_unreachable: Counter, "Owners (or next nodes) a miss could not reach: the next node, then the origin, was asked.";
    inval_made: Counter, "Invalidations made here and sent to the other nodes.";
    inval_peer_applied: Counter, "Times another node applied an invalidation made here.";
    inval_peer_unanswered: Counter, "Times another node did not answer an invalidation made here.";
    inval_applied: Counter, "Invalidations made elsewhere applied here, sent or read from a journal.";
    inval_unsent: Counter, "Invalidations made by VCL or a vmod while 100 000 others waited to be sent: applied here and kept in the journal, which the others read when they next see this node come up.";
    journal: Gauge, "Invalidations in this node's journal.";
    marks_refused: Counter, "Requests whose peer mark did not verify (the mark was taken off).";
    msgs_rx: Counter, "Cluster datagrams received whose seal verified.";
    msgs_tx: Counter, "Cluster datagrams sent.";
    msgs_refused: Counter, "Cluster datagrams dropped: their seal did not verify, or was too old.";
    msgs_malformed: Counter, "Sealed cluster datagrams that did not read.";
    changes: Counter, "Membership changes seen: a node up, down or renamed.";
}

counter_table! {
    /// One identifier per `PEER.<node>.*` counter: what one other node of
    /// the cluster did with this one, and where it stands (Lacquer only).
    enum PeerCounter; table PEER; block PeerCounters;
    state: Gauge, "The node's state as SWIM judges it here: 2 alive, 1 suspect, 0 down.";
    share: Gauge, "Its share of the keys on the ring, in parts per million.";
    fetch: Counter, "Cache misses here that it answered as the object's owner.";
    fetch_unreachable: Counter, "Times it could not be reached for a miss (the next node, then the origin, was asked).";
    inval_sent: Counter, "Invalidations made here that it applied.";
    inval_unanswered: Counter, "Invalidations made here that it did not answer.";
    inval_applied: Counter, "Invalidations it made that were applied here.";
    position: Gauge, "How many invalidations it has made in its run, as it last said.";
    lag: Gauge, "Invalidations it made that this node has not applied.";
    its_lag: Gauge, "Invalidations made elsewhere that it has not applied, as it last said.";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_and_values_line_up() {
        let mut all = Vec::new();
        COUNTERS.snapshot(&mut all);
        assert_eq!(MAIN.len(), all.len());
        assert_eq!(MAIN[0].unit, Unit::Seconds);
        assert_eq!(MAIN[Counter::cache_hit as usize].name, "cache_hit");
        let before = COUNTERS.get(Counter::losthdr);
        COUNTERS.inc(Counter::losthdr);
        assert!(COUNTERS.get(Counter::losthdr) > before);
    }

    #[test]
    fn a_held_gauge_goes_down_when_its_guard_is_dropped_on_any_thread() {
        // A gauge no other test of this crate touches.
        let g = Counter::sess_tasks;
        let before = COUNTERS.get(g);
        let held = [COUNTERS.hold(g), COUNTERS.hold(g)];
        assert_eq!(COUNTERS.get(g), before + 2);
        let [one, other] = held;
        drop(one);
        assert_eq!(COUNTERS.get(g), before + 1);
        std::thread::spawn(move || drop(other)).join().unwrap();
        assert_eq!(COUNTERS.get(g), before);
    }

    #[test]
    fn threads_count_apart_and_their_counts_outlive_them() {
        let c = Counter::esi_errors;
        let before = COUNTERS.get(c);
        let gauge = Counter::n_object;
        let gauge_before = COUNTERS.get(gauge);
        let threads: Vec<_> = (0..4)
            .map(|_| {
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        COUNTERS.inc(c);
                    }
                    // A gauge raised here and lowered on another thread.
                    COUNTERS.add(gauge, 3);
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        COUNTERS.sub(gauge, 12);
        assert_eq!(COUNTERS.get(c).wrapping_sub(before), 4000);
        assert_eq!(COUNTERS.get(gauge), gauge_before);
        let mut all = Vec::new();
        COUNTERS.snapshot(&mut all);
        assert_eq!(all[c as usize], COUNTERS.get(c));
    }
}
