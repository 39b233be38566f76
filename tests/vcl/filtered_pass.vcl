# Every request passed, and every response inflated on its way through
# (beresp.do_gunzip): a private object the client reads as it comes.
vcl 4.1;

backend origin {
    .host = "${origin_host}";
    .port = "${origin_port}";
}

sub vcl_recv {
    return (pass);
}

sub vcl_backend_response {
    set beresp.do_gunzip = true;
}
