//! The serving threads and the accept loop: one single-threaded runtime per core serves the
//! connections handed to it ([`serve`]); every client connection, HTTP/1.1 or HTTP/2 (h2c by prior
//! knowledge), has a bound on every wait on the client (docs/DESIGN.md "Every wait has a bound").
//!
//! - HTTP/1.1: hyper's header read timeout bounds a client that sends its headers slowly and a
//!   kept-alive connection that sends nothing (the timer runs while hyper waits for the next
//!   request).
//! - HTTP/2 ([`ConnectionWatch`]): no request in flight and no byte written for the same time
//!   closes the connection with `GOAWAY` (hyper has no idle timeout for HTTP/2, and a peer that answers pings would
//!   otherwise hold its socket for ever); a request in flight while the connection writes nothing
//!   for the stall limit (a peer that never opens its flow-control window, which no socket write
//!   timeout sees) drops it. Pings find a peer that vanished without a FIN.
//! - Both: a write blocked for `--write-timeout-secs` closes the connection (`tokio-io-timeout`:
//!   a client that stops reading holds no memory), and shutdown gives open connections
//!   `--shutdown-grace-secs` and then closes them.
//!
//! - `limits`: [`ConnectionLimits`], the bounds on every connection, and the protocol settings.
//! - `accept`: [`serve`], the accept loop that hands each connection to the least busy thread,
//!   and the shutdown that waits for the threads.
//! - `serving_thread`: a serving thread's runtime, its connections and their count.
//! - `connection`: one client connection: HTTP/1.1 or h2c, served until it ends, idles, stalls
//!   or shutdown closes it.
//! - `http2_watch`: what an HTTP/2 connection is doing (requests in flight, writes), to find it
//!   idle or stalled.
//! - `write_clock`: the socket of an HTTP/2 connection, whose response frames count as progress.

mod accept;
mod connection;
mod http2_watch;
mod limits;
mod serving_thread;
mod write_clock;

pub use accept::{serve, MakeApp};
pub use limits::ConnectionLimits;
