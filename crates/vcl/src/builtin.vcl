# The built-in VCL: appended after every loaded program. Each method
# calls its `vcl_builtin_*` part, which calls small subroutines a program
# may extend or cut short with `return;` (a `sub vcl_req_cookie
# { return; }` caches requests with cookies), then returns the default.
vcl 4.1;

sub vcl_recv {
    call vcl_builtin_recv;
    return (hash);
}

sub vcl_builtin_recv {
    call vcl_req_host;
    call vcl_req_method;
    call vcl_req_authorization;
    call vcl_req_cookie;
}

sub vcl_req_host {
    if (req.http.host ~ "[[:upper:]]") {
        # One cache key whatever the case of the name.
        set req.http.host = req.http.host.lower();
    }
    if (!req.http.host && req.esi_level == 0 && req.proto == "HTTP/1.1") {
        # HTTP/1.1 requires a Host header.
        return (synth(400));
    }
}

sub vcl_req_method {
    if (req.method == "PRI") {
        # An HTTP/2 preface on an HTTP/1 connection.
        return (synth(405));
    }
    if (req.method != "GET" && req.method != "HEAD" && req.method != "PUT" &&
        req.method != "POST" && req.method != "TRACE" && req.method != "OPTIONS" &&
        req.method != "DELETE" && req.method != "PATCH") {
        # A method we do not understand: tunnel it.
        return (pipe);
    }
    if (req.method != "GET" && req.method != "HEAD") {
        return (pass);
    }
}

sub vcl_req_authorization {
    if (req.http.Authorization) {
        # Personal content is not cached by default.
        return (pass);
    }
}

sub vcl_req_cookie {
    if (req.http.Cookie) {
        # Nor is what a cookie may personalise.
        return (pass);
    }
}

sub vcl_pipe {
    call vcl_builtin_pipe;
    return (pipe);
}

sub vcl_builtin_pipe {
}

sub vcl_pass {
    call vcl_builtin_pass;
    return (fetch);
}

sub vcl_builtin_pass {
}

sub vcl_hash {
    call vcl_builtin_hash;
    return (lookup);
}

sub vcl_builtin_hash {
    hash_data(req.url);
    if (req.http.host) {
        hash_data(req.http.host);
    } else {
        hash_data(server.ip);
    }
}

sub vcl_purge {
    call vcl_builtin_purge;
    return (synth(200, "Purged"));
}

sub vcl_builtin_purge {
}

sub vcl_hit {
    call vcl_builtin_hit;
    return (deliver);
}

sub vcl_builtin_hit {
}

sub vcl_miss {
    call vcl_builtin_miss;
    return (fetch);
}

sub vcl_builtin_miss {
}

sub vcl_deliver {
    call vcl_builtin_deliver;
    return (deliver);
}

sub vcl_builtin_deliver {
}

sub vcl_synth {
    call vcl_builtin_synth;
    return (deliver);
}

sub vcl_builtin_synth {
    set resp.http.Content-Type = "text/html; charset=utf-8";
    set resp.http.Retry-After = "5";
    set resp.body = {"<!DOCTYPE html>
<html>
  <head>
    <title>"} + resp.status + " " + resp.reason + {"</title>
  </head>
  <body>
    <h1>Error "} + resp.status + " " + resp.reason + {"</h1>
    <p>"} + resp.reason + {"</p>
    <h3>Guru Meditation:</h3>
    <p>XID: "} + req.xid + {"</p>
    <hr>
    <p>Lacquer cache server</p>
  </body>
</html>
"};
}

sub vcl_backend_fetch {
    call vcl_builtin_backend_fetch;
    return (fetch);
}

sub vcl_builtin_backend_fetch {
    if (bereq.method == "GET") {
        unset bereq.body;
    }
}

sub vcl_backend_refresh {
    call vcl_builtin_backend_refresh;
    return (merge);
}

sub vcl_builtin_backend_refresh {
    call vcl_refresh_valid;
    call vcl_refresh_conditions;
    call vcl_refresh_status;
}

# A ban or purge removed the stale object while its 304 was on the way.
sub vcl_refresh_valid {
    if (!obj_stale.is_valid) {
        return (error(503, "Invalid object for refresh"));
    }
}

# A 304 answers only a conditional request.
sub vcl_refresh_conditions {
    if (!bereq.http.if-modified-since &&
        !bereq.http.if-none-match) {
        return (error(503, "Unexpected 304"));
    }
}

# Only a 200 is revalidated (VCL that means otherwise overrides this sub).
sub vcl_refresh_status {
    if (obj_stale.status != 200) {
        return (error(503, "Invalid object for refresh (status)"));
    }
}

sub vcl_backend_response {
    call vcl_builtin_backend_response;
    return (deliver);
}

sub vcl_builtin_backend_response {
    if (bereq.uncacheable) {
        return (deliver);
    }
    call vcl_beresp_stale;
    call vcl_beresp_cookie;
    call vcl_beresp_control;
    call vcl_beresp_vary;
}

sub vcl_beresp_stale {
    if (beresp.ttl <= 0s) {
        call vcl_beresp_hitmiss;
    }
}

sub vcl_beresp_cookie {
    if (beresp.http.Set-Cookie) {
        call vcl_beresp_hitmiss;
    }
}

sub vcl_beresp_control {
    # A field that targets this cache (RFC 9213) decides instead of
    # Cache-Control, unless Varnish's rules alone are asked for.
    if (beresp.http.Surrogate-Control ~ "(?i)no-store" ||
        (!beresp.http.Surrogate-Control &&
         beresp.http.Cache-Control ~ "(?i:no-cache|no-store|private)" &&
         (param.varnish_compat_ttl ||
          !(beresp.http.Lacquer-Cache-Control || beresp.http.CDN-Cache-Control)))) {
        call vcl_beresp_hitmiss;
    }
}

sub vcl_beresp_vary {
    if (beresp.http.Vary == "*") {
        call vcl_beresp_hitmiss;
    }
}

sub vcl_beresp_hitmiss {
    # Remember that this is uncacheable: hit-for-miss.
    set beresp.ttl = param.uncacheable_ttl;
    set beresp.uncacheable = true;
    return (deliver);
}

sub vcl_backend_error {
    call vcl_builtin_backend_error;
    return (deliver);
}

sub vcl_builtin_backend_error {
    set beresp.http.Content-Type = "text/html; charset=utf-8";
    set beresp.http.Retry-After = "5";
    set beresp.body = {"<!DOCTYPE html>
<html>
  <head>
    <title>"} + beresp.status + " " + beresp.reason + {"</title>
  </head>
  <body>
    <h1>Error "} + beresp.status + " " + beresp.reason + {"</h1>
    <p>"} + beresp.reason + {"</p>
    <h3>Guru Meditation:</h3>
    <p>XID: "} + bereq.xid + {"</p>
    <hr>
    <p>Lacquer cache server</p>
  </body>
</html>
"};
}

sub vcl_init {
    return (ok);
}

sub vcl_fini {
    return (ok);
}
