//! The default registry: Sluice's built-in job kinds, assembled above the
//! modules that define them, so that the registry itself names none.

use crate::registry::Registry;

impl Registry {
    /// Sluice's built-in jobs.
    pub fn builtin() -> Self {
        let mut r = Registry::new();
        crate::builtin::register(&mut r);
        crate::iterative::register(&mut r);
        crate::benchjobs::register(&mut r);
        r
    }
}
