//! The server's operations: ONE table, below, that everything else reads. Each line names an
//! operation (`/v1/<name>`), the names it was answered under before (still answered), and
//! what it is: `writes` (refused by a read-only server, acknowledged once durable),
//! `documents` (its memory charged per byte of body at `limits::DOCUMENT_FACTOR`), `get`
//! (a `GET` may ask it: it takes no arguments), `batch` (a fingerprint batch: the binary form,
//! memory charged per item), `single` (answered on the connection's thread, unless it writes
//! and a write waits for an fsync). Routing (`http`), the request decoder (`protocol`), the
//! metrics (one series per operation, in this order) and `GET /v1/info`'s `operations` read
//! it; tests check `format-spec/protocol.md` and the Python client against it.

/// What an operation is, as its line in the table says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traits {
    writes: bool,
    documents: bool,
    get: bool,
    batch: bool,
    single: bool,
}

impl Traits {
    const fn writes(self) -> Self {
        Traits { writes: true, ..self }
    }
    const fn documents(self) -> Self {
        Traits { documents: true, ..self }
    }
    const fn get(self) -> Self {
        Traits { get: true, ..self }
    }
    const fn batch(self) -> Self {
        Traits { batch: true, ..self }
    }
    const fn single(self) -> Self {
        Traits { single: true, ..self }
    }
}

macro_rules! operations {
    ($($op:ident = $name:literal $(or $old:literal)* [$($trait:ident),*],)*) => {
        /// Every operation, named as in the path `/v1/<name>`.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Op {
            $($op,)*
        }

        impl Op {
            /// Every operation, in the table's order (the metrics list them so).
            pub const ALL: [Op; [$($name),*].len()] = [$(Op::$op,)*];

            /// The name in paths, metrics and logs.
            pub fn name(self) -> &'static str {
                match self {
                    $(Op::$op => $name,)*
                }
            }

            /// The names it was answered under before, still answered.
            pub fn old_names(self) -> &'static [&'static str] {
                match self {
                    $(Op::$op => &[$($old),*],)*
                }
            }

            fn traits(self) -> Traits {
                match self {
                    $(Op::$op => Traits::default()$(.$trait())*,)*
                }
            }
        }
    };
}

operations! {
    Query = "query" [single],
    FindOrInsert = "find_or_insert" [writes, single],
    Insert = "insert" or "add" [writes, single],
    Delete = "delete" [writes, single],
    QueryMany = "query_many" [batch],
    FindOrInsertMany = "find_or_insert_many" [writes, batch],
    InsertMany = "insert_many" or "add_many" [writes, batch],
    DeleteMany = "delete_many" [writes, batch],
    FingerprintDocument = "fingerprint_document" [documents],
    FingerprintDocuments = "fingerprint_documents" [documents],
    InsertDocument = "insert_document" or "add_document" [writes, documents],
    QueryDocument = "query_document" [documents],
    FindOrInsertDocument = "find_or_insert_document" [writes, documents],
    FindOrInsertDocuments = "find_or_insert_documents" [writes, documents],
    FingerprintsOf = "fingerprints_of" [],
    Replace = "replace" [writes],
    FindOrReplace = "find_or_replace" [writes],
    FindOrReplaceDocument = "find_or_replace_document" [writes, documents],
    LiveEntries = "live_entries" [get],
    Info = "info" [get, single],
    Stats = "stats" [get],
    Sync = "sync" [],
    Flush = "flush" [writes],
    Compact = "compact" [writes],
}

impl Op {
    /// The operation `/v1/<name>` names (or one of its old names).
    pub fn from_path(path: &str) -> Option<Op> {
        let name = path.strip_prefix("/v1/")?;
        Op::ALL.into_iter().find(|op| op.name() == name || op.old_names().contains(&name))
    }

    /// Its position in [`Op::ALL`].
    pub fn index(self) -> usize {
        Op::ALL.iter().position(|&o| o == self).unwrap_or(0)
    }

    /// True for operations that change the index (refused by a read-only server, and
    /// acknowledged only once durable).
    pub fn writes(self) -> bool {
        self.traits().writes
    }

    /// True for the operations that take documents (their memory is charged per byte of
    /// body at `limits::DOCUMENT_FACTOR`).
    pub fn documents(self) -> bool {
        self.traits().documents
    }

    /// True for the operations a `GET` may ask (they take no arguments).
    pub fn gettable(self) -> bool {
        self.traits().get
    }

    /// True for the fingerprint batches: they take the binary form too, and their memory is
    /// charged per item once decoded.
    pub fn batch(self) -> bool {
        self.traits().batch
    }

    /// True for the calls the connection's thread may answer itself (one fingerprint, or
    /// none); a write among them goes to the blocking pool when it waits for an fsync.
    pub fn single(self) -> bool {
        self.traits().single
    }
}
