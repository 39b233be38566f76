# Typical rules of a production site, for the benchmark's case (e): cookie
# stripping with regsuball, Accept-Encoding normalisation, URL patterns
# that pass, header clean-up. ORIGIN_PORT is replaced by bench/run.sh.
vcl 4.1;

backend origin {
    .host = "127.0.0.1";
    .port = "ORIGIN_PORT";
}

sub vcl_recv {
    if (req.url ~ "^/(admin|login|cart|checkout)" || req.url ~ "\?.*nocache") {
        return (pass);
    }
    if (req.method == "PURGE") {
        return (synth(405, "Not allowed"));
    }
    if (req.http.Accept-Encoding) {
        if (req.url ~ "\.(jpg|jpeg|png|gif|gz|tgz|bz2|mp3|ogg)$") {
            unset req.http.Accept-Encoding;
        } elsif (req.http.Accept-Encoding ~ "gzip") {
            set req.http.Accept-Encoding = "gzip";
        } elsif (req.http.Accept-Encoding ~ "deflate") {
            set req.http.Accept-Encoding = "deflate";
        } else {
            unset req.http.Accept-Encoding;
        }
    }
    if (req.http.Cookie) {
        set req.http.Cookie = regsuball(req.http.Cookie, "(^|;\s*)(_ga|_gid|__utm[a-z]+)=[^;]*", "");
        set req.http.Cookie = regsub(req.http.Cookie, "^;\s*", "");
        if (req.http.Cookie ~ "^\s*$") {
            unset req.http.Cookie;
        }
    }
    unset req.http.X-Forwarded-Host;
    return (hash);
}

sub vcl_backend_response {
    if (bereq.url ~ "\.(css|js|png|jpg|svg)$") {
        set beresp.ttl = 1d;
    }
    unset beresp.http.X-Powered-By;
    set beresp.grace = 1h;
}

sub vcl_deliver {
    if (obj.hits > 0) {
        set resp.http.X-Cache = "HIT";
    } else {
        set resp.http.X-Cache = "MISS";
    }
    unset resp.http.Server;
}
