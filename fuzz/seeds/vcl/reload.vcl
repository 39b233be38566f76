# A program loaded and switched at run time through the management
# interface. ${colour} names the program in every response it delivers;
# objects are cached across switches.
vcl 4.1;

backend origin {
    .host = "${origin_host}";
    .port = "${origin_port}";
}

sub vcl_recv {
    if (req.url ~ "^/nocache") {
        return (pass);
    }
}

sub vcl_backend_response {
    set beresp.ttl = 1h;
}

sub vcl_deliver {
    set resp.http.X-Program = "${colour}";
    set resp.http.X-Hits = obj.hits;
}
