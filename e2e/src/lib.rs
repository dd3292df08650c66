//! Full-stack end-to-end tests for kandev.
