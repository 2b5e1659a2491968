//! Leader election on etcd (work in progress).
