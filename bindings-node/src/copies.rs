//! Epoch-scoped copies of tenant roots for JavaScript, and their verified restore.
//!
//! Every rule is the core's; this only moves arguments and results across. Calls run on
//! their durable store's lane. A call that may wait for JavaScript runs on a thread of its own
//! instead: a restore given a JS `verify`, and a copy when the copies have a JS `snapshot`.
//! The core calls those functions while it holds the copies of that tenant, and they (JS
//! functions, maybe async) can wait for anything, another copy call on the same lane or a
//! lease store call included, none of which may then find its threads taken by the wait.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use gotry_tenant_state::errors::Result;
use gotry_tenant_state::{
    CopyId, CopyListing, EpochCopies, GcReport, RestoreReport, SkippedCopy, TenantLease, WrittenCopy,
};
use napi::bindgen_prelude::Unknown;
use napi::Env;
use napi_derive::napi;

use crate::args::{self, safe_count, safe_number};
use crate::durable::NativeDurableStore;
use crate::errors::OrThrow;
use crate::executor::{unless_waiting, Lane, Pending};
use crate::host::{fold_check, host_snapshot, SnapshotFunction, VerifyFunction};
use crate::lease::NativeLease;
use crate::tasks::{queue, CopyIdsTask, CopyListTask, GcTask, Job, RestoreTask, WrittenCopyTask};

/// A copy's place in the order restores follow: epoch first, then sequence.
#[napi(object, js_name = "CopyId")]
pub struct JsCopyId {
    pub epoch: f64,
    pub seq: f64,
}

/// A copy's epoch and sequence number as JS numbers, as every value that names a copy has them.
fn place(epoch: i64, seq: u64) -> Result<(f64, f64)> {
    Ok((safe_number("epoch", epoch)?, safe_count("seq", seq)?))
}

impl JsCopyId {
    pub fn from_core(id: CopyId) -> Result<JsCopyId> {
        let (epoch, seq) = place(id.epoch, id.seq)?;
        Ok(JsCopyId { epoch, seq })
    }

    pub fn all(ids: Vec<CopyId>) -> Result<Vec<JsCopyId>> {
        ids.into_iter().map(JsCopyId::from_core).collect()
    }
}

/// A copy a restore passed over, and why.
#[napi(object, js_name = "SkippedCopy")]
pub struct JsSkippedCopy {
    pub epoch: f64,
    pub seq: f64,
    #[napi(ts_type = "'manifest' | 'tenant' | 'checksum' | 'integrity' | 'fold' | 'superseded'")]
    pub reason: String,
}

impl JsSkippedCopy {
    pub fn from_core(skipped: &SkippedCopy) -> Result<JsSkippedCopy> {
        let (epoch, seq) = place(skipped.id.epoch, skipped.id.seq)?;
        Ok(JsSkippedCopy {
            epoch,
            seq,
            reason: skipped.reason.as_str().to_owned(),
        })
    }
}

/// A copy taken as written.
#[napi(object, js_name = "WrittenCopy")]
pub struct JsWrittenCopy {
    pub epoch: f64,
    pub seq: f64,
    pub files: f64,
    pub bytes: f64,
    /// Objects this copy stored beside its manifest (those too large to ride inline in it), and
    /// the bytes of all it made, inline ones included.
    pub pieces_uploaded: f64,
    pub bytes_uploaded: f64,
    /// Objects of earlier copies of its lineage that it references instead of storing them, and
    /// the bytes it references (inline ones carried from an earlier manifest included).
    pub pieces_reused: f64,
    pub bytes_reused: f64,
}

impl JsWrittenCopy {
    pub fn from_core(copy: WrittenCopy) -> Result<JsWrittenCopy> {
        let (epoch, seq) = place(copy.id.epoch, copy.id.seq)?;
        Ok(JsWrittenCopy {
            epoch,
            seq,
            files: safe_count("files", copy.files as u64)?,
            bytes: safe_count("bytes", copy.bytes)?,
            pieces_uploaded: safe_count("piecesUploaded", copy.pieces_uploaded as u64)?,
            bytes_uploaded: safe_count("bytesUploaded", copy.bytes_uploaded)?,
            pieces_reused: safe_count("piecesReused", copy.pieces_reused as u64)?,
            bytes_reused: safe_count("bytesReused", copy.bytes_reused)?,
        })
    }
}

/// What a restore did: the copy it installed (`null`: an empty start) and every copy it
/// passed over, newest first.
#[napi(object, js_name = "RestoreReport", use_nullable = true)]
pub struct JsRestoreReport {
    pub restored: Option<JsCopyId>,
    pub skipped: Vec<JsSkippedCopy>,
    pub files: f64,
    pub bytes: f64,
}

impl JsRestoreReport {
    pub fn from_core(report: RestoreReport) -> Result<JsRestoreReport> {
        Ok(JsRestoreReport {
            restored: report.restored.map(JsCopyId::from_core).transpose()?,
            skipped: report
                .skipped
                .iter()
                .map(JsSkippedCopy::from_core)
                .collect::<Result<_>>()?,
            files: safe_count("files", report.files as u64)?,
            bytes: safe_count("bytes", report.bytes)?,
        })
    }
}

/// One copy as the store lists it, without reading it.
#[napi(object, js_name = "CopyListing")]
pub struct JsCopyListing {
    pub epoch: f64,
    pub seq: f64,
    /// The manifest is there: the copy exists (which does not say it verifies).
    pub complete: bool,
    pub objects: f64,
    pub bytes: f64,
}

impl JsCopyListing {
    pub fn all(listings: Vec<CopyListing>) -> Result<Vec<JsCopyListing>> {
        listings
            .into_iter()
            .map(|copy| {
                let (epoch, seq) = place(copy.id.epoch, copy.id.seq)?;
                Ok(JsCopyListing {
                    epoch,
                    seq,
                    complete: copy.complete,
                    objects: safe_count("objects", copy.objects as u64)?,
                    bytes: safe_count("bytes", copy.bytes)?,
                })
            })
            .collect()
    }
}

/// What a garbage collection kept and deleted.
#[napi(object, js_name = "GcReport")]
pub struct JsGcReport {
    pub kept: Vec<JsCopyId>,
    pub deleted: Vec<JsCopyId>,
}

impl JsGcReport {
    pub fn from_core(report: GcReport) -> Result<JsGcReport> {
        Ok(JsGcReport {
            kept: JsCopyId::all(report.kept)?,
            deleted: JsCopyId::all(report.deleted)?,
        })
    }
}

/// Copies of tenant roots in one durable store.
#[napi]
pub struct NativeEpochCopies {
    copies: Arc<EpochCopies>,
    lane: Arc<Lane>,
    /// Whether a copy may wait for the host's `snapshot`.
    host_snapshot: bool,
}

#[napi]
impl NativeEpochCopies {
    /// `snapshot`, when given, is the JS layer's wrapper of the host's function that writes an
    /// image of a file the host has open (see the core's `HostSnapshot`).
    #[napi(constructor)]
    pub fn new(
        store: &NativeDurableStore,
        #[napi(ts_arg_type = "(source: string, image: string) => Promise<void>")] snapshot: Option<
            SnapshotFunction<'_>,
        >,
    ) -> napi::Result<NativeEpochCopies> {
        let snapshot = snapshot.as_ref().map(host_snapshot).transpose()?;
        Ok(NativeEpochCopies {
            host_snapshot: snapshot.is_some(),
            copies: Arc::new(EpochCopies::new(store.store.clone()).with_host_snapshot(snapshot)),
            lane: store.lane.clone(),
        })
    }

    #[napi(ts_return_type = "Promise<WrittenCopy>")]
    pub fn write_copy(
        &self,
        env: Env,
        lease: &NativeLease,
        root: Unknown<'_>,
    ) -> napi::Result<Pending<WrittenCopyTask>> {
        let copies = self.copies.clone();
        queue(&env, unless_waiting(self.host_snapshot, &self.lane), || {
            let (lease, root) = held_and_root(lease, &root)?;
            Ok(Job::new(None, move || copies.write_copy(&lease, &root)))
        })
    }

    /// `verify`, when given, is the JS layer's wrapper of the host's check.
    #[napi(ts_return_type = "Promise<RestoreReport>")]
    pub fn restore(
        &self,
        env: Env,
        lease: &NativeLease,
        root: Unknown<'_>,
        #[napi(ts_arg_type = "(dir: string) => Promise<boolean>")] verify: Option<VerifyFunction<'_>>,
    ) -> napi::Result<Pending<RestoreTask>> {
        let (lease, root) = held_and_root(lease, &root).or_throw(&env)?;
        let check = verify.as_ref().map(fold_check).transpose()?;
        let copies = self.copies.clone();
        let task = RestoreTask(Job::new(None, move || {
            let check = check
                .as_deref()
                .map(|check| check as &dyn Fn(&Path) -> Result<bool>);
            copies.restore(&lease, &root, check)
        }));
        Ok(Pending::new(unless_waiting(verify.is_some(), &self.lane), task))
    }

    /// Every copy of `key` in the store, oldest first.
    #[napi(ts_return_type = "Promise<Array<CopyListing>>")]
    pub fn list(&self, env: Env, key: Unknown<'_>) -> napi::Result<Pending<CopyListTask>> {
        let copies = self.copies.clone();
        queue(&env, Some(&self.lane), || {
            let key = args::string("key", &key)?;
            Ok(Job::new(None, move || copies.list(&key)))
        })
    }

    #[napi(ts_return_type = "Promise<Array<CopyId>>")]
    pub fn forget_copies(&self, lease: &NativeLease) -> Pending<CopyIdsTask> {
        let (lease, copies) = (lease.holder(), self.copies.clone());
        let job = Job::new(None, move || copies.forget_copies(&lease));
        Pending::new(Some(&self.lane), CopyIdsTask(job))
    }

    #[napi(ts_return_type = "Promise<GcReport>")]
    pub fn gc(&self, env: Env, lease: &NativeLease, keep: Unknown<'_>) -> napi::Result<Pending<GcTask>> {
        let (lease, copies) = (lease.holder(), self.copies.clone());
        queue(&env, Some(&self.lane), || {
            let keep = args::count("keep", &keep)?;
            Ok(Job::new(None, move || copies.gc(&lease, keep)))
        })
    }
}

fn held_and_root(lease: &NativeLease, root: &Unknown<'_>) -> Result<(Arc<TenantLease>, PathBuf)> {
    Ok((lease.holder(), PathBuf::from(args::string("root", root)?)))
}
