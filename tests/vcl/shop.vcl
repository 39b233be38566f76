vcl 4.1;

import std;
import cookie;
import xkey;
import header;
import directors;

probe health {
    .url = "/health_check.php";
    .timeout = 2s;
    .interval = 5s;
    .window = 10;
    .threshold = 5;
}

backend web1 {
    .host = "127.0.0.1";
    .port = "8080";
    .first_byte_timeout = 600s;
    .probe = health;
}

backend web2 {
    .host = "127.0.0.1";
    .port = "8081";
    .probe = health;
}

acl purge {
    "localhost";
    "127.0.0.1";
    "10.0.0.0"/8;
}

sub vcl_init {
    new shop = directors.round_robin();
    shop.add_backend(web1);
    shop.add_backend(web2);
}

sub vcl_recv {
    set req.backend_hint = shop.backend();
    set req.http.host = req.http.host.lower();
    if (req.restarts > 0) {
        set req.hash_always_miss = true;
    }
    if (req.method == "PURGE") {
        if (client.ip !~ purge) {
            return (synth(405, "Method not allowed"));
        }
        if (req.http.X-Shop-Tags-Pattern) {
            ban("obj.http.X-Shop-Tags ~ " + req.http.X-Shop-Tags-Pattern);
        }
        if (req.http.xkey) {
            set req.http.n-gone = xkey.purge(req.http.xkey);
            return (synth(200, "Invalidated " + req.http.n-gone + " objects"));
        }
        return (synth(200, "Purged"));
    }
    if (req.method != "GET" && req.method != "HEAD") {
        return (pass);
    }
    if (req.url ~ "^/(checkout|customer|admin)/" || req.url ~ "/graphql" && req.http.Authorization ~ "^Bearer") {
        return (pass);
    }
    std.collect(req.http.Cookie);
    if (req.http.Cookie) {
        cookie.parse(req.http.Cookie);
        cookie.keep("PHPSESSID,X-Shop-Vary,store,currency");
        set req.http.Cookie = cookie.get_string();
        if (req.http.Cookie == "") {
            unset req.http.Cookie;
        }
    }
    set req.url = regsuball(req.url, "(gclid|fbclid|utm_[a-z]+)=[^&]+&?", "");
    set req.url = regsub(req.url, "[?&]+$", "");
    if (req.url ~ "^/(pub/)?(media|static)/") {
        unset req.http.Cookie;
    }
    if (std.healthy(req.backend_hint)) {
        set req.grace = 10s;
    } else {
        set req.grace = 24h;
    }
    if (std.integer(req.http.X-Debug-Level, 0) > 2) {
        std.log("debugging " + req.url);
    }
    return (hash);
}

sub vcl_hash {
    if (req.http.cookie ~ "X-Shop-Vary=") {
        hash_data(regsub(req.http.cookie, "^.*?X-Shop-Vary=([^;]+);*.*$", "\1"));
    }
    hash_data(req.http.X-Forwarded-Proto);
}

sub vcl_backend_response {
    set beresp.grace = 3d;
    if (beresp.http.content-type ~ "text") {
        set beresp.do_esi = true;
    }
    if (bereq.url ~ "\.js$" || beresp.http.content-type ~ "text") {
        set beresp.do_gzip = true;
    }
    if (beresp.status != 200 && beresp.status != 404) {
        set beresp.ttl = 0s;
        set beresp.uncacheable = true;
        return (deliver);
    } elsif (beresp.http.Cache-Control ~ "private") {
        set beresp.uncacheable = true;
        set beresp.ttl = std.duration(beresp.http.X-Private-Ttl, 86400s);
        return (deliver);
    }
    if (beresp.ttl > 0s && (bereq.method == "GET" || bereq.method == "HEAD")) {
        unset beresp.http.set-cookie;
    }
    if (beresp.ttl <= 0s || beresp.http.Vary == "*") {
        return (pass(120s));
    }
    header.append(beresp.http.X-Served-By, server.identity);
    return (deliver);
}

sub vcl_deliver {
    if (resp.http.X-Shop-Debug) {
        if (obj.hits > 0) {
            set resp.http.X-Shop-Cache-Debug = "HIT";
            set resp.http.Grace = req.http.grace;
        } else {
            set resp.http.X-Shop-Cache-Debug = "MISS";
        }
    } else {
        unset resp.http.Age;
    }
    unset resp.http.X-Shop-Tags;
    unset resp.http.X-Powered-By;
    unset resp.http.Server;
    unset resp.http.Via;
    unset resp.http.Link;
}

sub vcl_synth {
    if (resp.status == 405) {
        set resp.http.Allow = "GET, HEAD, PURGE";
    }
}
