//! A live segment's band file as the engine holds it (`banded` builds and uses it): in use,
//! or none with the reason (missing, damaged, set aside after a failed lookup), replaced in
//! place while queries run.

use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use crate::bands::BandFile;
use crate::error::Error;

/// A live segment's band file, replaced in place: set aside when a lookup finds it damaged
/// (the segment's check then goes to its tables), installed when it is built again, while
/// queries run.
#[derive(Debug, Default)]
pub(crate) struct BandSlot {
    file: RwLock<Option<Held>>,
    /// Why a segment that stores sketches has no band file in use (missing, damaged, set
    /// aside after a lookup failed): what `Stats::band_files_unusable` says.
    unusable: Mutex<Option<String>>,
}

/// A band file in use, and whether it holds every entry of its segment (each has a sketch).
#[derive(Debug)]
struct Held {
    file: Arc<BandFile>,
    whole: bool,
}

impl BandSlot {
    /// A slot holding `file`, which holds every entry of its segment when `whole`.
    pub(crate) fn with(file: BandFile, whole: bool) -> BandSlot {
        BandSlot { file: RwLock::new(Some(Held { file: Arc::new(file), whole })), unusable: Mutex::new(None) }
    }

    /// A slot without a band file, for `reason`.
    pub(crate) fn without(reason: String) -> BandSlot {
        BandSlot { file: RwLock::new(None), unusable: Mutex::new(Some(reason)) }
    }

    /// The band file in use.
    pub(crate) fn file(&self) -> Option<Arc<BandFile>> {
        self.file.read().unwrap_or_else(|p| p.into_inner()).as_ref().map(|h| h.file.clone())
    }

    /// The band file in use when it holds every entry of its segment (every entry has a
    /// sketch): its lookups alone find the segment's candidates for the crawler's check.
    pub(crate) fn whole_file(&self) -> Option<Arc<BandFile>> {
        self.file.read().unwrap_or_else(|p| p.into_inner()).as_ref().filter(|h| h.whole).map(|h| h.file.clone())
    }

    /// Why the segment has no band file in use, when it should have one.
    pub(crate) fn unusable(&self) -> Option<String> {
        self.reason().clone()
    }

    fn reason(&self) -> MutexGuard<'_, Option<String>> {
        self.unusable.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Stops using `file` (when it is still the one in use) because of `fault`.
    pub(crate) fn set_aside(&self, file: &Arc<BandFile>, fault: &Error) {
        let mut slot = self.file.write().unwrap_or_else(|p| p.into_inner());
        if slot.as_ref().is_some_and(|h| Arc::ptr_eq(&h.file, file)) {
            *slot = None;
            *self.reason() = Some(format!("{fault}; its segment's check is answered from the tables until it is rebuilt"));
        }
    }

    /// Puts `file` in use (`whole`: it holds every entry of its segment).
    pub(crate) fn install(&self, file: BandFile, whole: bool) {
        *self.file.write().unwrap_or_else(|p| p.into_inner()) = Some(Held { file: Arc::new(file), whole });
        *self.reason() = None;
    }
}
