backend bw1 { .host = "127.0.0.1";
.probe = { .url = "/google0ccdbf1e9571f6ef.html";
.interval = 5s;
.timeout = 1s;
.window = 5;
.threshold = 3; }}
backend bw2 { .host = "127.0.0.2";
.probe = { .url = "/google0ccdbf1e9571f6ef.html";
.interval = 5s; .timeout = 1s; .window = 5; .threshold = 3; }}
backend bw1ssl { .host = "127.0.0.1"; .port = "443"; }
backend bw2ssl { .host = "127.0.0.2"; .port = "443"; }
director default_director round-robin {
{ .backend = bw1; }
{ .backend = bw2; }
}
director ssl_director round-robin {
{ .backend = bw1ssl; }
{ .backend = bw2ssl; }
}
acl internal {
"192.168.1.38"/26;
}
sub vcl_recv {
if (server.port == 443) {
set req.backend = ssl_director;
}
else {
set req.backend = default_director;
}
set req.grace = 6h;
if (!req.backend.healthy) {
unset req.http.Cookie;
}
if (req.url ~ "^/(cron|install)\.php$" && !client.ip ~ internal) {
error 404 "Page not found.";
}
if (req.url ~ "^/content/music/$") {
return (pipe);
}
}
sub vcl_fetch {
set beresp.grace = 6h;
}
