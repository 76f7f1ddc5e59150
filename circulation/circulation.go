// Package circulation is the domain of the circulation service: check-out by
// barcode under the patron's check-out lock, check-in, and the runtime
// settings of the lock feature. It knows circulation-storage only through the
// Storage interface (implemented over HTTP by package storageclient) and
// imports neither the HTTP framework nor a database driver.
package circulation
