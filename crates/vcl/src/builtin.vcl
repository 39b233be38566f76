# The built-in VCL: appended after every loaded program, so that a
# method which does not return falls through to the default behaviour.
vcl 4.1;

sub vcl_recv {
    if (req.method == "PRI") {
        # An HTTP/2 preface on an HTTP/1 connection.
        return (synth(405));
    }
    if (!req.http.host && req.esi_level == 0 && req.proto ~ "^(?i)HTTP/1\.1") {
        # HTTP/1.1 requires a Host header.
        return (synth(400));
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
    if (req.http.Authorization || req.http.Cookie) {
        # Personal content is not cached by default.
        return (pass);
    }
    return (hash);
}

sub vcl_pipe {
    return (pipe);
}

sub vcl_pass {
    return (fetch);
}

sub vcl_hash {
    hash_data(req.url);
    if (req.http.host) {
        hash_data(req.http.host);
    } else {
        hash_data(server.ip);
    }
    return (lookup);
}

sub vcl_purge {
    return (synth(200, "Purged"));
}

sub vcl_hit {
    return (deliver);
}

sub vcl_miss {
    return (fetch);
}

sub vcl_deliver {
    return (deliver);
}

sub vcl_synth {
    set resp.http.Content-Type = "text/html; charset=utf-8";
    set resp.http.Retry-After = "5";
    set resp.body = {"<!DOCTYPE html>
<html>
<head><title>"} + resp.status + " " + resp.reason + {"</title></head>
<body>
<h1>Error "} + resp.status + " " + resp.reason + {"</h1>
<p>Guru Meditation: XID "} + req.xid + {"</p>
<hr>
<p>Lacquer</p>
</body>
</html>
"};
    return (deliver);
}

sub vcl_backend_fetch {
    if (bereq.method == "GET") {
        unset bereq.body;
    }
    return (fetch);
}

sub vcl_backend_response {
    if (bereq.uncacheable) {
        return (deliver);
    }
    if (beresp.ttl <= 0s ||
        beresp.http.Set-Cookie ||
        beresp.http.Surrogate-Control ~ "(?i)no-store" ||
        (!beresp.http.Surrogate-Control &&
         beresp.http.Cache-Control ~ "(?i:no-cache|no-store|private)") ||
        beresp.http.Vary == "*") {
        # Remember that this is uncacheable: hit-for-miss.
        set beresp.ttl = param.uncacheable_ttl;
        set beresp.uncacheable = true;
    }
    return (deliver);
}

sub vcl_backend_error {
    set beresp.http.Content-Type = "text/html; charset=utf-8";
    set beresp.http.Retry-After = "5";
    set beresp.body = {"<!DOCTYPE html>
<html>
<head><title>"} + beresp.status + " " + beresp.reason + {"</title></head>
<body>
<h1>Error "} + beresp.status + " " + beresp.reason + {"</h1>
<p>Guru Meditation: XID "} + bereq.xid + {"</p>
<hr>
<p>Lacquer</p>
</body>
</html>
"};
    return (deliver);
}

sub vcl_init {
    return (ok);
}

sub vcl_fini {
    return (ok);
}
