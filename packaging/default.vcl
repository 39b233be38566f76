vcl 4.1;

# Lacquer's program: the web server it accelerates. Edit, then
# `systemctl reload lacquer` (or `lacquer reload -n /var/lib/lacquer`).
backend default {
    .host = "127.0.0.1";
    .port = "8080";
}

sub vcl_recv {
}

sub vcl_backend_response {
}

sub vcl_deliver {
}
