//! The core's metrics for Node: the text a host's `/metrics` endpoint serves. Rendering the
//! text is the core's; `lib/metrics.js` hands it to prom-client.

/// The media type of `metricsText()`: the Prometheus text format 0.0.4.
#[napi_derive::napi]
pub const METRICS_CONTENT_TYPE: &str = gotry_tenant_state::metrics::CONTENT_TYPE;

/// Every metric family of this process in the Prometheus text format 0.0.4. Synchronous:
/// it reads counters, takes no lock and does no I/O.
#[napi_derive::napi]
pub fn metrics_text() -> String {
    gotry_tenant_state::metrics::encode()
}
