pub mod timeline;
