# Invalidation by ban, as operators wire it: a BAN method allowed from an
# ACL that bans by host and URL, a tag ban through std.ban() with its error
# reported back, and object headers that let the ban lurker work (bans on
# obj.* only). Used by the end-to-end suite.
vcl 4.1;

import std;

backend origin {
    .host = "${origin_host}";
    .port = "${origin_port}";
}

acl invalidators {
    "localhost";
    "127.0.0.1";
}

sub vcl_recv {
    if (req.method == "BAN") {
        if (client.ip !~ invalidators) {
            return (synth(405, "Banning not allowed"));
        }
        if (req.http.X-Ban-Tag) {
            if (std.ban("obj.http.X-Tag ~ " + req.http.X-Ban-Tag)) {
                return (synth(200, "Banned tag"));
            }
            return (synth(400, std.ban_error()));
        }
        ban("req.http.host == " + req.http.host + " && req.url ~ " + req.url);
        return (synth(200, "Banned"));
    }
}

sub vcl_backend_response {
    # The URL on the object, so that URL bans need no request.
    set beresp.http.X-Url = bereq.url;
}

sub vcl_deliver {
    unset resp.http.X-Url;
    if (obj.hits > 0) {
        set resp.http.X-Cache = "HIT";
    } else {
        set resp.http.X-Cache = "MISS";
    }
}
