//! Why a client session ended: Varnish's session close reasons, each with
//! its log name, whether it counts as an error, and its `sc_*` counter.

use crate::counters::{Counter, COUNTERS};

macro_rules! close_table {
    ($( $variant:ident => $name:literal, $err:literal, $counter:ident; )*) => {
        /// A session close reason.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum CloseReason { $( $variant, )* }

        impl CloseReason {
            /// The name Varnish logs in `SessClose`.
            pub fn name(self) -> &'static str {
                match self { $( CloseReason::$variant => $name, )* }
            }

            /// Whether this close counts as an error.
            pub fn is_error(self) -> bool {
                match self { $( CloseReason::$variant => $err, )* }
            }

            /// Counts this close in `sc_*` and `sess_closed[_err]`.
            pub fn count(self) {
                let counter = match self { $( CloseReason::$variant => Counter::$counter, )* };
                COUNTERS.inc(counter);
                COUNTERS.inc(if self.is_error() { Counter::sess_closed_err } else { Counter::sess_closed });
            }
        }
    };
}

close_table! {
    RemClose => "REM_CLOSE", false, sc_rem_close;
    ReqClose => "REQ_CLOSE", false, sc_req_close;
    ReqHttp10 => "REQ_HTTP10", true, sc_req_http10;
    RxBad => "RX_BAD", true, sc_rx_bad;
    RxBody => "RX_BODY", true, sc_rx_body;
    RxJunk => "RX_JUNK", true, sc_rx_junk;
    RxOverflow => "RX_OVERFLOW", true, sc_rx_overflow;
    RxTimeout => "RX_TIMEOUT", true, sc_rx_timeout;
    RxCloseIdle => "RX_CLOSE_IDLE", false, sc_rx_close_idle;
    RapidReset => "RAPID_RESET", true, sc_rapid_reset;
    Calm => "ENHANCE_YOUR_CALM", true, sc_calm;
    TxError => "TX_ERROR", true, sc_tx_error;
    TxEof => "TX_EOF", false, sc_tx_eof;
    RespClose => "RESP_CLOSE", false, sc_resp_close;
    Overload => "OVERLOAD", true, sc_overload;
    RangeShort => "RANGE_SHORT", true, sc_range_short;
    SendTimeout => "TX_ERROR", true, sc_send_timeout;
    TxPipe => "TX_PIPE", false, sc_tx_pipe;
    VclFailure => "VCL_FAILURE", true, sc_vcl_failure;
}
