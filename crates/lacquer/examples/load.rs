//! A closed-loop load client for the benchmarks: one connection over
//! HTTP/2 (TLS) or HTTP/3 (QUIC), a number of streams kept in flight on
//! it, each asking for the same URL again as soon as its last answer has
//! come whole; it prints every request's latency percentiles, so that
//! both protocols are measured by the same client. The server's
//! certificate is not checked (the benchmarks make their own).
//!
//! Usage: load h2|h3 ADDR:PORT AUTHORITY PATH REQUESTS STREAMS

use bytes::Bytes;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 7 {
        eprintln!("usage: load h2|h3 ADDR:PORT AUTHORITY PATH REQUESTS STREAMS");
        std::process::exit(2);
    }
    let addr: SocketAddr = args[2].parse().expect("ADDR:PORT");
    let url = format!("https://{}{}", args[3], args[4]);
    let requests: usize = args[5].parse().expect("REQUESTS");
    let streams: usize = args[6].parse().expect("STREAMS");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let started = Instant::now();
    let (mut micros, failed) = rt.block_on(async {
        match args[1].as_str() {
            "h2" => h2_load(addr, &args[3], url, requests, streams).await,
            "h3" => h3_load(addr, &args[3], url, requests, streams).await,
            other => panic!("{other}: h2 or h3"),
        }
    });
    let took = started.elapsed().as_secs_f64();
    micros.sort_unstable();
    let at =
        |q: f64| micros[((micros.len() as f64 * q) as usize).min(micros.len() - 1)] as f64 / 1000.0;
    let mean = micros.iter().sum::<u64>() as f64 / micros.len() as f64 / 1000.0;
    println!(
        "done {} failed {} in {:.2}s ({:.0} req/s); ms: mean {:.3} p50 {:.3} p90 {:.3} p99 {:.3} max {:.3}",
        micros.len(),
        failed,
        took,
        micros.len() as f64 / took,
        mean,
        at(0.50),
        at(0.90),
        at(0.99),
        at(1.0),
    );
}

/// Accepts any certificate (the benchmark's own, self-signed).
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

fn tls(alpn: &[u8]) -> rustls::ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    config
}

/// Runs `streams` loops sharing `requests`, each timing its requests
/// with `one`; the latencies (µs) and how many failed.
async fn run<F, Fut>(requests: usize, streams: usize, one: F) -> (Vec<u64>, usize)
where
    F: Fn() -> Fut + Clone + 'static,
    Fut: std::future::Future<Output = bool> + 'static,
{
    let next = Arc::new(AtomicUsize::new(0));
    let local = tokio::task::LocalSet::new();
    let mut tasks = Vec::new();
    for _ in 0..streams {
        let (next, one) = (next.clone(), one.clone());
        tasks.push(local.spawn_local(async move {
            let (mut micros, mut failed) = (Vec::new(), 0);
            while next.fetch_add(1, Ordering::Relaxed) < requests {
                let t = Instant::now();
                if one().await {
                    micros.push(t.elapsed().as_micros() as u64);
                } else {
                    failed += 1;
                }
            }
            (micros, failed)
        }));
    }
    local
        .run_until(async {
            let (mut all, mut failed) = (Vec::new(), 0);
            for t in tasks {
                let (m, f) = t.await.unwrap();
                all.extend(m);
                failed += f;
            }
            (all, failed)
        })
        .await
}

async fn h2_load(
    addr: SocketAddr,
    authority: &str,
    url: String,
    requests: usize,
    streams: usize,
) -> (Vec<u64>, usize) {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(tls(b"h2")));
    let name = rustls::pki_types::ServerName::try_from(authority.to_string()).unwrap();
    let stream = connector.connect(name, tcp).await.unwrap();
    let (send, conn) = h2::client::Builder::new()
        .initial_window_size(1 << 20)
        .handshake::<_, Bytes>(stream)
        .await
        .unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    run(requests, streams, move || {
        let (send, url) = (send.clone(), url.clone());
        async move {
            let Ok(mut send) = send.ready().await else {
                return false;
            };
            let req = http::Request::get(url).body(()).unwrap();
            let Ok((resp, _)) = send.send_request(req, true) else {
                return false;
            };
            let Ok(resp) = resp.await else { return false };
            let mut body = resp.into_body();
            while let Some(chunk) = body.data().await {
                let Ok(chunk) = chunk else { return false };
                let _ = body.flow_control().release_capacity(chunk.len());
            }
            true
        }
    })
    .await
}

async fn h3_load(
    addr: SocketAddr,
    authority: &str,
    url: String,
    requests: usize,
    streams: usize,
) -> (Vec<u64>, usize) {
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls(b"h3")).unwrap();
    let mut endpoint = quinn::Endpoint::client("0.0.0.0:0".parse().unwrap()).unwrap();
    endpoint.set_default_client_config(quinn::ClientConfig::new(Arc::new(crypto)));
    let conn = endpoint.connect(addr, authority).unwrap().await.unwrap();
    // HTTP/3 by hand, as lean as a client can be, so that what is timed
    // is the server and QUIC: the client's control stream and SETTINGS,
    // then each request one HEADERS frame made once (static entries and
    // literals), and each response read whole and its status checked.
    let mut control = conn.open_uni().await.unwrap();
    control.write_all(&[0x00, 0x04, 0x00]).await.unwrap();
    let path = url
        .splitn(4, '/')
        .nth(3)
        .map_or("/".to_string(), |p| format!("/{p}"));
    let request = Bytes::from(headers_frame(authority, &path));
    let answered = run(requests, streams, move || {
        let (conn, request) = (conn.clone(), request.clone());
        async move {
            let Ok((mut send, mut recv)) = conn.open_bi().await else {
                return false;
            };
            if send.write_chunk(request).await.is_err() || send.finish().is_err() {
                return false;
            }
            let Ok(resp) = recv.read_to_end(1 << 24).await else {
                return false;
            };
            // HEADERS, its length, the section's prefix, :status 200.
            let len = 1usize << (resp.get(1).copied().unwrap_or(0) >> 6);
            resp.first() == Some(&0x01) && resp.get(1 + len + 2) == Some(&(0xc0 | 25))
        }
    })
    .await;
    drop(control);
    answered
}

/// A GET's HEADERS frame: `:method GET`, `:scheme https` (static
/// entries), `:authority` and `:path` (literals under static names).
fn headers_frame(authority: &str, path: &str) -> Vec<u8> {
    let literal = |index: u8, value: &str| {
        assert!(value.len() < 127);
        let mut out = vec![0x50 | index, value.len() as u8];
        out.extend_from_slice(value.as_bytes());
        out
    };
    let mut block = vec![0x00, 0x00, 0xc0 | 17, 0xc0 | 23];
    block.extend(literal(0, authority));
    block.extend(literal(1, path));
    assert!(block.len() < 64);
    let mut frame = vec![0x01, block.len() as u8];
    frame.extend(block);
    frame
}
