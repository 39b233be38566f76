# A typical site configuration: cookie and Accept-Encoding normalisation,
# passes by URL, purges from an ACL, static-file TTLs, synthetic answers,
# restarts and delivery headers. Used by the end-to-end suite.
vcl 4.1;

import std;

backend origin {
    .host = "${origin_host}";
    .port = "${origin_port}";
    .first_byte_timeout = 5s;
}

acl purgers {
    "localhost";
    "127.0.0.1";
    ! "127.0.0.2";
    "10.0.0.0"/8;
}

sub vcl_recv {
    if (req.method == "PURGE") {
        if (client.ip !~ purgers) {
            return (synth(405, "Purging not allowed"));
        }
        return (purge);
    }
    if (req.url ~ "^/blocked") {
        return (synth(12403, "Blocked"));
    }
    if (req.url ~ "^/old/") {
        set req.url = regsub(req.url, "^/old/", "/new/");
        return (restart);
    }
    # Analytics cookies never reach the origin; others mean personal content.
    if (req.http.Cookie) {
        set req.http.Cookie = regsuball(req.http.Cookie, "(^|;\s*)(_ga|_gid|__utm[a-z]+)=[^;]*", "");
        set req.http.Cookie = regsub(req.http.Cookie, "^;\s*", "");
        if (req.http.Cookie ~ "^\s*$") {
            unset req.http.Cookie;
        }
    }
    if (req.http.Accept-Encoding) {
        if (req.url ~ "\.(jpg|png|gif|gz|zip)$") {
            unset req.http.Accept-Encoding;
        } elsif (req.http.Accept-Encoding ~ "gzip") {
            set req.http.Accept-Encoding = "gzip";
        } else {
            unset req.http.Accept-Encoding;
        }
    }
    if (req.url ~ "^/(admin|login)(/|$)" || req.url ~ "(?i)\?.*nocache") {
        return (pass);
    }
    set req.http.X-Recv-Restarts = req.restarts;
}

sub vcl_hash {
    if (req.http.X-Variant) {
        hash_data(req.http.X-Variant);
    }
}

sub vcl_backend_fetch {
    set bereq.http.X-Fetched-By = "lacquer";
}

sub vcl_backend_response {
    if (bereq.url ~ "\.(css|js)$") {
        unset beresp.http.Set-Cookie;
        set beresp.ttl = 1h;
        set beresp.grace = 2m;
    }
    if (beresp.status == 404) {
        set beresp.ttl = 0s;
        set beresp.uncacheable = true;
        return (deliver);
    }
    set beresp.http.X-Backend = beresp.backend.name;
}

sub vcl_deliver {
    if (obj.hits > 0) {
        set resp.http.X-Cache = "HIT";
    } else {
        set resp.http.X-Cache = "MISS";
    }
    set resp.http.X-Hits = obj.hits;
    unset resp.http.X-Powered-By;
    unset resp.http.Via;
}

sub vcl_synth {
    if (resp.status == 12403) {
        set resp.status = 403;
        set resp.http.Content-Type = "text/plain";
        set resp.body = "blocked by policy: " + req.url;
        return (deliver);
    }
}
