# Pipe for a path, endless restarts, hit-for-pass, retries of failed fetches, vcl_backend_error building
# the error page, and a failing VCL statement.
vcl 4.1;

import std;

backend origin {
    .host = "${origin_host}";
    .port = "${origin_port}";
}

sub vcl_recv {
    if (req.url ~ "^/loop") {
        return (restart);
    }
    if (req.url ~ "^/tunnel") {
        return (pipe);
    }
    if (req.url ~ "^/fail") {
        set req.http.X-Number = std.integer(req.http.X-Not-A-Number);
    }
}

sub vcl_pipe {
    set bereq.http.X-Piped = "yes";
}

sub vcl_backend_response {
    if (beresp.status == 500 && bereq.retries < 2) {
        return (retry);
    }
    set beresp.http.X-Retries = bereq.retries;
    if (bereq.url ~ "^/hfp") {
        return (pass(1m));
    }
}

sub vcl_backend_error {
    set beresp.http.Content-Type = "text/plain";
    set beresp.body = "origin unavailable after " + bereq.retries + " retries";
    return (deliver);
}
