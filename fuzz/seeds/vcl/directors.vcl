# Seed 002 rewritten for VCL 4.1: two web servers behind a round-robin
# director (`director ... round-robin` is now vmod directors), the backend
# chosen in vcl_recv, grace from vcl_fetch now in vcl_backend_response.
vcl 4.1;

import std;
import directors;

backend bw1 {
    .host = "${web1_host}";
    .port = "${web1_port}";
}

backend bw2 {
    .host = "${web2_host}";
    .port = "${web2_port}";
}

sub vcl_init {
    new default_director = directors.round_robin();
    default_director.add_backend(bw1);
    default_director.add_backend(bw2);
    new sticky = directors.fallback();
    sticky.add_backend(bw2);
    sticky.add_backend(bw1);
}

sub vcl_recv {
    if (std.port(server.ip) == 443) {
        set req.backend_hint = sticky.backend();
    } elsif (req.url ~ "^/fallback") {
        set req.backend_hint = sticky.backend();
    } else {
        set req.backend_hint = default_director.backend();
    }
    set req.grace = 6h;
    if (!std.healthy(req.backend_hint)) {
        unset req.http.Cookie;
    }
    return (pass);
}

sub vcl_backend_response {
    set beresp.grace = 6h;
    set beresp.http.X-Served-By = beresp.backend.name;
}
