//! Every parameter: its name (varnishd's where it has one), kind,
//! default, unit, bounds and description, sorted by name. The
//! `param_table!` macro of the parent makes [`ParamId`], [`PARAMS`] and
//! a typed reader on `Params` for each.

use super::{Kind, ParamSpec, Params};
use std::sync::atomic::Ordering;

param_table! {
    accept_filter: Bool, "on", "bool", min None, max None,
        "Defer each new connection until its first bytes come (on Linux, TCP_DEFER_ACCEPT on the listening sockets; a connection that sends nothing is taken after a second, and timeout_idle runs from then). The connection is then read and answered without waiting on the event loop. A change takes effect as each listener next accepts a connection.";
    acceptor_sleep_decay: Text, "0.9", "", min None, max None,
        "Accepted for varnishd command lines (a fraction from 0 to 1); see acceptor_sleep_incr.";
    acceptor_sleep_incr: Seconds, "0", "seconds", min Some("0"), max Some("1"),
        "Accepted for varnishd command lines. Lacquer pauses 10 ms after an accept that fails for want of descriptors, and counts it in sess_fail_*.";
    acceptor_sleep_max: Seconds, "0.050", "seconds", min Some("0"), max Some("10"),
        "Accepted for varnishd command lines; see acceptor_sleep_incr.";
    answer_half_closed: Bool, "on", "bool", min None, max None,
        "Answer a client that closes its sending side (a half-close) after its request, as varnishd does: the end of its stream is not taken as the client leaving (a reset or an error still is). Off: a client whose stream ends while its answer is awaited is taken to have gone (a close and a half-close look alike until something is written), so a pass or a hit-for-miss fetch is given up at once instead of when the answer would be written. Once an ESI page is being written, the end of its client's stream always means the client has gone and cancels the page's includes. Lacquer-only.";
    auto_restart: Bool, "on", "bool", min None, max None,
        "Accepted for varnishd command lines: there is no separate child process to restart; a panic in one request is contained to it.";
    backend_idle_timeout: Seconds, "60", "seconds", min Some("1"), max None,
        "Timeout before unused backend connections are closed.";
    backend_local_error_holddown: Seconds, "10", "seconds", min Some("0"), max None,
        "After a connection to a backend fails with EADDRNOTAVAIL, EACCES or EPERM (a local shortage or configuration issue), no new connection to it is attempted for this long, and directors pass it over.";
    backend_remote_error_holddown: Seconds, "0.25", "seconds", min Some("0"), max None,
        "After a connection to a backend fails with ECONNREFUSED or ENETUNREACH (the backend is not there), no new connection to it is attempted for this long, and directors pass it over.";
    backend_wait_limit: Count, "0", "", min Some("0"), max None,
        "How many fetches may wait in line for a connection to a backend at its .max_connections (a backend's .wait_limit overrides it). 0 means none wait: a fetch to a full backend fails at once as busy.";
    backend_wait_timeout: Seconds, "0", "seconds", min Some("0"), max None,
        "How long a fetch waits in line for a connection to a backend at its .max_connections before it fails as busy (a backend's .wait_timeout overrides it). 0 means no waiting.";
    ban_cutoff: Count, "0", "bans", min Some("0"), max None,
        "Keep the number of bans below this by expunging the objects that hold on to the oldest ones (counted in bans_lurker_obj_killed_cutoff). 0 disables.";
    ban_dups: Bool, "on", "bool", min None, max None,
        "Mark older identical bans completed when a new ban is added, so that objects are not tested against the same ban twice.";
    ban_lurker_age: Seconds, "60", "seconds", min Some("0"), max None,
        "The ban lurker ignores bans until they are this old; until then lookups alone test objects against them.";
    ban_lurker_batch: Count, "1000", "objects", min Some("1"), max None,
        "The ban lurker sleeps ban_lurker_sleep after examining this many objects.";
    ban_lurker_holdoff: Seconds, "0.010", "seconds", min Some("0"), max None,
        "How long the ban lurker waits before it takes an index shard that lookups are using.";
    ban_lurker_sleep: Seconds, "0.010", "seconds", min Some("0"), max None,
        "How long the ban lurker sleeps after examining ban_lurker_batch objects. 0 disables the ban lurker.";
    between_bytes_timeout: Seconds, "60", "seconds", min Some("0"), max None,
        "How long to wait between two reads of a backend response body before the fetch fails.";
    brotli_level: Count, "5", "", min Some("0"), max Some("11"),
        "Brotli quality of the br renditions Lacquer makes of cached objects, and of ESI pages compressed as they are delivered: 0=fast, 11=best. Lacquer-only.";
    cc_command: Text, "exec $CC $CFLAGS %w -shared -o %o %s", "", min None, max None,
        "Accepted for varnishd command lines: VCL is interpreted, never compiled to C.";
    cc_warnings: Text, "-Wall -Werror", "", min None, max None,
        "Accepted for varnishd command lines; see cc_command.";
    cli_limit: Bytes, "48k", "bytes", min Some("128b"), max Some("99999999b"),
        "Maximum size of a management interface response. A longer one is cut at this size and its status is 201 (truncated).";
    cli_timeout: Seconds, "60", "seconds", min Some("0"), max None,
        "Accepted for varnishd command lines: management commands run in the daemon itself, with no child to wait for.";
    clock_skew: Seconds, "10", "seconds", min Some("0"), max None,
        "Accepted for varnishd command lines: there is no child process whose clock could drift from the manager's.";
    clock_step: Seconds, "1", "seconds", min Some("0"), max None,
        "Accepted for varnishd command lines; see clock_skew.";
    cluster_connect_timeout: Seconds, "0.5", "seconds", min Some("0.001"), max None,
        "How long a node waits for a connection to the owner of an object it fetches through the cluster before it tries the next node on the ring, and then the origin.";
    cluster_copy_ttl: Seconds, "120", "seconds", min Some("0"), max None,
        "How long, at most, a node keeps an object it fetched through the node that owns it (the owner keeps it as long as its TTL says): its TTL, then grace, then keep are cut to end this long after the fetch, whatever VCL set. 0 keeps nothing, as a self-routing Varnish cluster passes; more keeps hot objects near their clients, at the price of memory on every node. Lacquer-only.";
    cluster_rampup: Seconds, "0", "seconds", min Some("0"), max None,
        "How long a node that has just started takes to get its whole share of the keys, as the shard director's rampup: a key it owns goes to it with a probability that grows from 0 to 1 over this time, else to the next node on the ring (which is likely to hold the object). 0 turns it off. Lacquer-only.";
    cluster_replicas: Count, "67", "points", min Some("1"), max Some("10000"),
        "Points each node has on the cluster's ring, as the shard director's replicas: more points spread the keys more evenly. Read when the daemon starts.";
    cluster_warmup: Fraction, "0", "", min Some("0"), max Some("1"),
        "How often a cache miss goes to the next node on the ring instead of the owner, as the shard director's warmup: that node then holds the hot objects of the owner, should it go away. 0 turns it off. Lacquer-only.";
    compress_jobs: Count, "2", "jobs", min Some("1"), max Some("256"),
        "br and zstd renditions of cached objects made at once, off the request path; a request that finds every job busy is served gzip (or as stored) and a later one asks again. Lacquer-only.";
    compress_max_size: Bytes, "16M", "bytes", min Some("1k"), max None,
        "Largest object (as stored, and once inflated) a br or zstd rendition is made of: the work spent on one object is bounded. Lacquer-only.";
    compress_min_size: Bytes, "256b", "bytes", min Some("0b"), max None,
        "Smallest object a br or zstd rendition is made of. Lacquer-only.";
    compress_types: Text, "text/* application/javascript application/x-javascript application/json application/*+json application/xml application/*+xml application/wasm image/svg+xml image/x-icon font/ttf font/otf application/vnd.ms-fontobject", "", min None, max None,
        "The media types (of Content-Type, without parameters; * matches any run of characters) that get br and zstd renditions. Lacquer-only.";
    connect_timeout: Seconds, "3.5", "seconds", min Some("0"), max None,
        "How long to wait for a backend connection to be established.";
    critbit_cooloff: Seconds, "180", "seconds", min Some("60"), max Some("254"),
        "Accepted for varnishd command lines: the index is sharded hash tables, not a critbit tree.";
    debug: Text, "none", "", min None, max None,
        "Debugging switches, a list of +name and -name. req_state logs each step of every client request as a Debug record (vxid N STP_NAME; vsl_mask must let Debug records through). Any other of varnishd's names is taken and does nothing: they reach its internals.";
    default_grace: Seconds, "10", "seconds", min Some("0"), max None,
        "Grace given to objects when neither the backend nor VCL sets one: how long a stale object may still be delivered while it is refreshed.";
    default_keep: Seconds, "0", "seconds", min Some("0"), max None,
        "How long an expired object is kept for conditional revalidation when VCL sets nothing else.";
    default_ttl: Seconds, "120", "seconds", min Some("0"), max None,
        "The TTL given to objects when neither the backend nor VCL assigns one.";
    esi_parallel: Count, "10", "includes", min Some("1"), max Some("1000"),
        "Lacquer: how many ESI includes are fetched at once for one client request, nested pages included (each page may also always fetch the one include it is waiting for). Delivery stays in document order; 1 fetches them one after another, as Varnish does.";
    experimental: Text, "none", "", min None, max None,
        "Accepted for varnishd command lines: any list of +name and -name is taken and none of them acts.";
    feature: Features, "+http2,+validate_headers", "", min None, max None,
        "Enable/Disable various minor features: a list of +name and -name (none and default also allowed).";
    fetch_chunksize: Bytes, "16k", "bytes", min Some("4k"), max None,
        "Accepted for varnishd command lines: a fetch stores the buffers it reads, without a separate chunk size.";
    fetch_maxchunksize: Bytes, "256m", "bytes", min Some("64k"), max None,
        "Accepted for varnishd command lines; see fetch_chunksize.";
    first_byte_timeout: Seconds, "60", "seconds", min Some("0"), max None,
        "How long to wait for the first byte of a backend response.";
    gzip_buffer: Bytes, "32k", "bytes", min Some("2k"), max None,
        "Accepted for varnishd command lines: inflating goes in 64 KiB slices and deflating through the compressor's own buffer.";
    gzip_level: Count, "6", "", min Some("0"), max Some("9"),
        "Gzip compression level: 0=debug, 1=fast, 9=best";
    gzip_memlevel: Count, "8", "", min Some("1"), max Some("9"),
        "Gzip memory level 1=slow/least, 9=fast/most compression. Accepted for compatibility with Varnish's flags; Lacquer's deflate implementation sizes its own state, so the value has no effect.";
    h2_header_table_size: Bytes, "4k", "bytes", min Some("0b"), max None,
        "HTTP/2 header table size: the HPACK dynamic table the client may use for what it sends (SETTINGS_HEADER_TABLE_SIZE).";
    h2_initial_window_size: Bytes, "65535b", "bytes", min Some("65535b"), max Some("2147483647b"),
        "HTTP/2 initial flow-control window of each stream for what the client sends (SETTINGS_INITIAL_WINDOW_SIZE).";
    h2_max_concurrent_streams: Count, "100", "streams", min Some("0"), max None,
        "HTTP/2 streams a client may have open at once on one connection (SETTINGS_MAX_CONCURRENT_STREAMS).";
    h2_max_frame_size: Bytes, "16k", "bytes", min Some("16k"), max Some("16777215b"),
        "HTTP/2 largest frame payload the client may send (SETTINGS_MAX_FRAME_SIZE).";
    h2_max_header_list_size: Bytes, "2147483647b", "bytes", min Some("0b"), max None,
        "HTTP/2 largest header list a client may send (SETTINGS_MAX_HEADER_LIST_SIZE); never more than http_req_size.";
    h2_rapid_reset: Seconds, "1", "seconds", min Some("0"), max None,
        "A stream the client resets sooner than this after its HEADERS counts against h2_rapid_reset_limit.";
    h2_rapid_reset_limit: Count, "100", "", min Some("0"), max None,
        "HTTP/2 rapid resets allowed within h2_rapid_reset_period before the connection is closed (GOAWAY ENHANCE_YOUR_CALM); 0 turns the limit off.";
    h2_rapid_reset_period: Seconds, "60", "seconds", min Some("1"), max None,
        "The sliding window h2_rapid_reset_limit counts over.";
    h2_rx_window_increment: Bytes, "1M", "bytes", min Some("1M"), max Some("1G"),
        "HTTP/2 flow-control window of a whole connection for what the client sends.";
    h2_rx_window_low_water: Bytes, "10M", "bytes", min Some("65535b"), max Some("1G"),
        "Accepted for varnishd command lines: the connection's receive window is h2_rx_window_increment, given back as request bodies are read.";
    h2_rxbuf_storage: Text, "Transient", "", min None, max None,
        "Accepted for varnishd command lines: HTTP/2 request bodies are read as the steps ask for them, with no buffer of their own.";
    h2_window_timeout: Seconds, "5", "seconds", min Some("0"), max None,
        "How long an HTTP/2 stream may wait for the client to open its flow-control window before the stream is reset.";
    h3_alt_svc_max_age: Seconds, "86400", "seconds", min Some("0"), max None,
        "How long the Alt-Svc field that TLS listeners with QUIC add to their HTTP/1.1 and HTTP/2 responses tells clients to remember that HTTP/3 is there (its ma=); 0 adds none. VCL sees the field in vcl_deliver, and may change or remove it. Lacquer-only.";
    h3_early_data: Bool, "on", "bool", min None, max None,
        "Accepts 0-RTT early data on QUIC connections that resume a session: a safe request (GET, HEAD, OPTIONS) in it is answered at once; any other waits for the handshake to complete. Read when the daemon starts. Lacquer-only.";
    h3_idle_timeout: Seconds, "30", "seconds", min Some("1"), max Some("600"),
        "How long a QUIC connection may stay silent before it is closed. Read when a listener starts accepting. Lacquer-only.";
    h3_max_concurrent_streams: Count, "100", "streams", min Some("1"), max Some("10000"),
        "HTTP/3 request streams a client may have open at once on one connection (QUIC's MAX_STREAMS). Read when a listener starts accepting. Lacquer-only.";
    h3_max_connections: Count, "10000", "connections", min Some("1"), max None,
        "QUIC connections a TLS listener keeps at once (handshakes under way included); a client past them is refused (CONNECTION_REFUSED) and counted in MAIN.h3_refused. Shared evenly, rounded up, by the endpoints of a listener that has one for each worker. Lacquer-only.";
    h3_max_header_list_size: Bytes, "64k", "bytes", min Some("1k"), max Some("1M"),
        "HTTP/3 largest header section a client may send (SETTINGS_MAX_FIELD_SECTION_SIZE); never more than http_req_size. Lacquer-only.";
    h3_rapid_reset: Seconds, "1", "seconds", min Some("0"), max None,
        "An HTTP/3 request stream the client stops or resets sooner than this after it opened counts against h3_rapid_reset_limit. Lacquer-only.";
    h3_rapid_reset_limit: Count, "100", "", min Some("0"), max None,
        "HTTP/3 rapid resets allowed within h3_rapid_reset_period before the connection is closed (H3_EXCESSIVE_LOAD); 0 turns the limit off. Lacquer-only.";
    h3_rapid_reset_period: Seconds, "60", "seconds", min Some("1"), max None,
        "The sliding window h3_rapid_reset_limit counts over. Lacquer-only.";
    h3_retry_above: Count, "64", "handshakes", min Some("0"), max None,
        "QUIC handshakes at work past which a client whose address is not yet validated is sent a Retry first (its next Initial proves it owns the address, so a flood from spoofed addresses costs a stateless packet each); 0 sends every new client a Retry. Shared evenly, rounded up, by the endpoints of a listener that has one for each worker. Lacquer-only.";
    h3_stream_window: Bytes, "1M", "bytes", min Some("16k"), max Some("1G"),
        "QUIC flow-control window of each stream for what the client sends; a connection's is ten times this. Lacquer-only.";
    http1_iovs: Count, "64", "iovecs", min Some("5"), max Some("1024"),
        "Accepted for varnishd command lines: a response goes out in gathered writes of at most 16 pieces each.";
    http_encodings: Text, "zstd,br,gzip", "", min None, max None,
        "The content codings served, most preferred first (of zstd, br and gzip): a client gets the one its Accept-Encoding gives the highest q-value, the earlier here on a tie. zstd and br are made once per cached object from what is stored (see compress_types) and kept beside it; gzip is Varnish's http_gzip_support. \"gzip\" alone serves as varnishd does. Needs http_gzip_support. Lacquer-only.";
    http_gzip_support: Bool, "on", "bool", min None, max None,
        "Enable gzip support. When enabled, objects are requested compressed from the backend and stored compressed; clients that do not accept gzip get them uncompressed on delivery. Accept-Encoding of clients that accept gzip is rewritten to \"gzip\", and removed for those that do not. When off, beresp.do_gzip and beresp.do_gunzip have no effect.";
    http_max_hdr: Count, "64", "header lines", min Some("32"), max Some("65535"),
        "Maximum number of header lines accepted in a request or a backend response.";
    http_range_support: Bool, "on", "bool", min None, max None,
        "Answer Range requests on cached objects with 206 Partial Content.";
    http_req_hdr_len: Bytes, "8k", "bytes", min Some("40b"), max None,
        "Maximum length of any one client request header line.";
    http_req_size: Bytes, "32k", "bytes", min Some("256b"), max None,
        "Maximum size of a client request head: request line and all headers.";
    http_resp_hdr_len: Bytes, "8k", "bytes", min Some("40b"), max None,
        "Maximum length of any one backend response header line.";
    http_resp_size: Bytes, "32k", "bytes", min Some("256b"), max None,
        "Maximum size of a backend response head: status line and all headers.";
    idle_send_timeout: Seconds, "60", "seconds", min Some("0"), max None,
        "Longest wait for a single write to a client to progress; extended while the whole response stays within send_timeout.";
    listen_depth: Count, "1024", "connections", min Some("0"), max None,
        "Listen queue depth of the client listening sockets.";
    lru_interval: Seconds, "2", "seconds", min Some("0"), max None,
        "An object is moved to the front of the LRU list at most once in this interval, to save lock traffic.";
    max_esi_depth: Count, "5", "levels", min Some("0"), max None,
        "Maximum depth of esi:include processing.";
    max_restarts: Count, "4", "restarts", min Some("0"), max None,
        "Upper limit on how many times a request can restart.";
    max_retries: Count, "4", "retries", min Some("0"), max None,
        "Upper limit on how many times a backend fetch can retry.";
    max_vcl: Count, "100", "programs", min Some("0"), max None,
        "How many VCL programs may be loaded before vcl.load and vcl.inline warn or refuse (max_vcl_handling).";
    max_vcl_handling: Count, "1", "", min Some("0"), max Some("2"),
        "What loading past max_vcl does: 0 nothing, 1 a warning, 2 a refusal.";
    nuke_limit: Count, "50", "allocations", min Some("0"), max None,
        "Maximum number of objects evicted to make room for one new allocation before the fetch fails.";
    pcre2_depth_limit: Count, "20", "", min Some("1"), max None,
        "Accepted for varnishd command lines: patterns without look-around or backreferences run on a linear-time engine, and the backtracking engine that runs the others keeps no recursion to limit (pcre2_match_limit bounds its work).";
    pcre2_jit_compilation: Bool, "on", "bool", min None, max None,
        "Accepted for varnishd command lines: there is no JIT to turn off.";
    pcre2_match_limit: Count, "10000", "", min Some("1"), max None,
        "The most backtracking steps one match of a pattern with look-around or backreferences may take; past it the match fails with a VCL_Error record. Other patterns run in linear time and need no bound. Applies to programs and bans compiled after it is set.";
    persistent_unsynced_max: Bytes, "128m", "bytes", min Some("1m"), max None,
        "The most bytes a persistent store writes ahead of what the disk has confirmed (its file is synced every 5 seconds, and sooner past half of this); past it, new objects are kept in memory only and counted in SMP.*.c_dropped, rather than a fill waiting for the disk.";
    ping_interval: Seconds, "3", "seconds", min Some("0"), max None,
        "Accepted for varnishd command lines: there is no child process to ping.";
    pipe_sess_max: Count, "0", "connections", min Some("0"), max None,
        "Accepted for varnishd command lines: pipes are not limited in number (pipe_limited stays 0).";
    pipe_timeout: Seconds, "60", "seconds", min Some("0"), max None,
        "Idle timeout for piped connections: the pipe closes when no byte has moved either way for this long.";
    pool_req: Text, "10,100,10", "", min None, max None,
        "Accepted for varnishd command lines (min_pool,max_pool,max_age): requests are allocated as they come, not from a pool.";
    pool_sess: Text, "10,100,10", "", min None, max None,
        "Accepted for varnishd command lines; see pool_req.";
    pool_vbo: Text, "10,100,10", "", min None, max None,
        "Accepted for varnishd command lines; see pool_req.";
    prefer_ipv6: Bool, "off", "bool", min None, max None,
        "Accepted for varnishd command lines: a backend host name is connected to at the first address it resolves to.";
    rush_exponent: Count, "3", "requests per request", min Some("2"), max None,
        "Accepted for varnishd command lines: when a busy object resolves, every waiting request is woken at once, so waiters on an uncacheable object fetch side by side rather than a few at a time.";
    send_timeout: Seconds, "600", "seconds", min Some("0"), max None,
        "Total time allowed to deliver one response to a client; when exceeded the connection is closed and everything the delivery held is freed.";
    shortlived: Seconds, "10", "seconds", min Some("0"), max None,
        "Objects whose ttl+grace+keep is shorter than this always go to the Transient store.";
    sigsegv_handler: Bool, "on", "bool", min None, max None,
        "Accepted for varnishd command lines: Lacquer is memory-safe Rust; a panic is caught, logged and contained to its request.";
    ssl_ca_file: Text, "/etc/ssl/certs/ca-certificates.crt", "", min None, max None,
        "The CA bundle (PEM) that TLS backends' certificates are checked against (.ssl_verify_peer), read when a program loads.";
    stale_if_error: Bool, "on", "bool", min None, max None,
        "Honour stale-if-error (RFC 5861, which varnishd ignores): when the refresh of an object that carries it fails, and VCL let the failure stand (vcl_backend_response delivered a 500 to 504 as it was, or vcl_backend_error delivered its error), the stale object is delivered instead, with a Notice record saying so. Off, or with varnish_compat_ttl on: the failure is delivered, as varnishd does.";
    syslog_cli_traffic: Bool, "on", "bool", min None, max None,
        "Accepted for varnishd command lines: management commands are not sent to syslog.";
    tcp_fastopen: Bool, "off", "bool", min None, max None,
        "Accepted for varnishd command lines: listening sockets do not enable TCP Fast Open.";
    tcp_keepalive_intvl: Seconds, "75", "seconds", min Some("1"), max Some("100"),
        "Accepted for varnishd command lines: client sockets keep the kernel's keepalive settings.";
    tcp_keepalive_probes: Count, "9", "probes", min Some("1"), max Some("100"),
        "Accepted for varnishd command lines; see tcp_keepalive_intvl.";
    tcp_keepalive_time: Seconds, "7200", "seconds", min Some("1"), max Some("7200"),
        "Accepted for varnishd command lines; see tcp_keepalive_intvl.";
    thread_pool_add_delay: Seconds, "0", "seconds", min Some("0"), max None,
        "Accepted for varnishd command lines: requests are tasks on one worker per core, so no threads are added.";
    thread_pool_destroy_delay: Seconds, "1", "seconds", min Some("0.01"), max None,
        "Accepted for varnishd command lines; see thread_pool_add_delay.";
    thread_pool_fail_delay: Seconds, "0.2", "seconds", min Some("0.01"), max None,
        "Accepted for varnishd command lines; see thread_pool_add_delay.";
    thread_pool_max: Count, "5000", "threads", min Some("5"), max None,
        "The most requests each pool works on at once (thread_pools pools): a request needs a place from the time its head is read until its response is sent, as it needs a thread in Varnish; an idle keep-alive connection needs none. Requests past it wait (thread_queue_limit).";
    thread_pool_min: Count, "100", "threads", min Some("5"), max None,
        "The most idle session tasks each worker keeps for its next connections, as Varnish keeps idle threads: a kept task serves a new connection without being made (about 6.5 KiB each while idle). Lacquer serves requests as tasks on one worker per core, so no thread is started for it.";
    thread_pool_reserve: Count, "0", "threads", min Some("0"), max None,
        "Accepted for varnishd command lines; see thread_pool_add_delay.";
    thread_pool_stack: Bytes, "80k", "bytes", min Some("16k"), max None,
        "Accepted for varnishd command lines: requests are tasks, whose state is boxed on the heap, not thread stacks.";
    thread_pool_timeout: Seconds, "300", "seconds", min Some("10"), max None,
        "Accepted for varnishd command lines; see thread_pool_add_delay.";
    thread_pool_watchdog: Seconds, "60", "seconds", min Some("0.1"), max None,
        "Accepted for varnishd command lines: with no thread pool there is no pool to be stuck waiting for threads.";
    thread_pools: Count, "2", "pools", min Some("1"), max Some("32"),
        "Multiplies thread_pool_max and thread_queue_limit (Lacquer runs one worker per core, not one pool of threads each).";
    thread_queue_limit: Count, "20", "requests", min Some("0"), max None,
        "How many requests per pool may wait for a place among those at work (thread_pool_max); past it a request is dropped with its connection (sess_dropped, req_dropped).";
    thread_stats_rate: Count, "10", "requests", min Some("0"), max None,
        "Accepted for varnishd command lines: each worker's counters are summed whenever they are read.";
    timeout_idle: Seconds, "5", "seconds", min Some("0"), max None,
        "Idle timeout for client connections: a connection is idle until a full request head has arrived, and is closed when this passes.";
    timeout_linger: Seconds, "0.050", "seconds", min Some("0"), max None,
        "How long to keep reading from a client after closing a connection on an error, so that the client receives the answer instead of a reset.";
    transit_buffer: Bytes, "1M", "bytes", min Some("0b"), max None,
        "How far the fetch of an uncacheable response (a pass, hit-for-miss or hit-for-pass) may read ahead of the client it is for; the backend is read no faster than the client takes the body, and not at all once the client has gone. 0 means no limit, as Varnish's default (Lacquer's is 1M, so that a slow client of a large response never holds it all in memory).";
    uncacheable_ttl: Seconds, "120", "seconds", min Some("0"), max None,
        "How long an uncacheable response is remembered as hit-for-miss, so that requests for it go straight to the backend without waiting on each other.";
    varnish_compat_ttl: Bool, "off", "bool", min None, max None,
        "Compute TTL, grace and keep by Varnish's rules alone: Cache-Control only (no CDN-Cache-Control or Lacquer-Cache-Control), lenient numbers, must-revalidate and s-maxage ignored for grace, and no only-if-cached handling. Off: RFC 9111 and RFC 9213 as README's \"Caching rules\" describes.";
    vary_notice: Count, "10", "variants", min Some("1"), max None,
        "Accepted for varnishd command lines: no notice is logged yet for an object head with many variants.";
    vcc_allow_inline_c: Bool, "off", "bool", min None, max None,
        "Accepted for varnishd command lines: VCL is interpreted, so inline C cannot be allowed.";
    vcc_err_unref: Bool, "on", "bool", min None, max None,
        "Unreferenced backends, probes, ACLs and subroutines in a VCL program are compile errors.";
    vcc_unsafe_path: Bool, "on", "bool", min None, max None,
        "Accepted for varnishd command lines: include paths are read as given.";
    vcl_cooldown: Seconds, "600", "seconds", min Some("1"), max None,
        "Accepted for varnishd command lines: a program no request uses is let go at once.";
    vcl_path: Text, "/etc/varnish:/usr/share/varnish/vcl", "", min None, max None,
        "Accepted for varnishd command lines: -f and include read a path as given (a relative one from the working directory).";
    vmod_path: Text, "/usr/lib/varnish/vmods", "", min None, max None,
        "Accepted for varnishd command lines: the vmods are built in.";
    vsl_buffer: Bytes, "16k", "bytes", min Some("267b"), max None,
        "Bytes each transaction buffers log records in before they go to the shared-memory log in one batch; a transaction also flushes when it ends.";
    vsl_enabled: Bool, "on", "bool", min None, max None,
        "Write the shared-memory log. Off spares its cost and leaves the log tools nothing to read. Lacquer-only.";
    vsl_mask: Text, "-ObjProtocol,-ObjStatus,-ObjReason,-ObjHeader,-VCL_trace,-Hash,-Debug,-ExpKill", "", min None, max None,
        "The tags left out of the log: -Tag leaves one out, +Tag puts it back (a glob such as Req* names several), default restores this list and none logs every tag; applied to the mask in force, and shown as the list that results. Varnish's tags that Lacquer never writes change nothing.";
    vsl_reclen: Bytes, "255b", "bytes", min Some("16b"), max Some("4084b"),
        "Maximum number of bytes in one log record; longer payloads are cut.";
    vsl_space: Bytes, "80M", "bytes", min Some("1M"), max Some("4G"),
        "Size of the shared-memory log ring. Too small and the log tools cannot keep up. Takes effect at start.";
    vsm_free_cooldown: Seconds, "60", "seconds", min Some("10"), max Some("600"),
        "Accepted for varnishd command lines: the shared files in the work directory are replaced whole, never reused in part.";
    worker_stall_limit: Seconds, "0.050", "seconds", min Some("0"), max Some("60"),
        "How long connections may wait in one worker's accept queue while that worker does not take them (its event loop held by a long piece of work, or more work than it can do) before they are taken from it and served by the other workers, each connection then living on the worker it was given to. Each queue is looked at this often (at most every 0.005 s, however small the value), so such a connection waits between one and two of it. 0 leaves every worker's connections to it alone. Lacquer-only.";
    workers: Count, "0", "threads", min Some("0"), max Some("1024"),
        "Number of worker threads that serve connections, each with its own event loop and its own listening socket per TCP listener (SO_REUSEPORT): a connection lives on the worker that accepted it. 0 means one per core. Read at start. Lacquer-only.";
    workspace_backend: Bytes, "96k", "bytes", min Some("1k"), max None,
        "Bytes for a backend request's head and the header values VCL sets in the backend subroutines; past it the VCL fails (ws_backend_overflow).";
    workspace_client: Bytes, "96k", "bytes", min Some("9k"), max None,
        "Bytes for a client request's head and the header values VCL sets in the client subroutines; past it the VCL fails (ws_client_overflow).";
    workspace_session: Bytes, "768b", "bytes", min Some("384b"), max None,
        "Accepted for varnishd command lines: sessions have no fixed workspace.";
    workspace_thread: Bytes, "2k", "bytes", min Some("256b"), max Some("8k"),
        "Accepted for varnishd command lines: there are no thread workspaces.";
    zstd_level: Count, "3", "", min Some("1"), max Some("19"),
        "zstd level of the zstd renditions Lacquer makes of cached objects, and of ESI pages compressed as they are delivered (levels past 19 would need windows larger than HTTP's 8 MiB). Lacquer-only.";
}
