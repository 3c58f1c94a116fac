//! A Hadoop cluster's client configuration: the `*-site.xml` files of
//! `HADOOP_CONF_DIR` (Hadoop's `<configuration><property><name>
//! <value>` format), the few keys Sluice on YARN reads, with Hadoop's
//! defaults where a file leaves one out.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::{Result, YarnError};

/// The files shipped to the ApplicationMaster, when present, so that it
/// reaches the same cluster: Hadoop's client reads them from its class
/// path.
pub const SHIPPED: [&str; 3] = ["core-site.xml", "hdfs-site.xml", "yarn-site.xml"];

/// Hadoop's default `yarn.application.classpath` (the cross-platform
/// form, expanded by each NodeManager).
const DEFAULT_CLASSPATH: &str = "{{HADOOP_CONF_DIR}},\
{{HADOOP_COMMON_HOME}}/share/hadoop/common/*,{{HADOOP_COMMON_HOME}}/share/hadoop/common/lib/*,\
{{HADOOP_HDFS_HOME}}/share/hadoop/hdfs/*,{{HADOOP_HDFS_HOME}}/share/hadoop/hdfs/lib/*,\
{{HADOOP_YARN_HOME}}/share/hadoop/yarn/*,{{HADOOP_YARN_HOME}}/share/hadoop/yarn/lib/*";

/// A client configuration directory, read.
#[derive(Debug, Clone)]
pub struct HadoopConf {
    /// The directory.
    pub dir: PathBuf,
    props: HashMap<String, String>,
}

impl HadoopConf {
    /// The directory `explicit` names, else `$HADOOP_CONF_DIR`'s.
    pub fn find(explicit: Option<&Path>) -> Result<HadoopConf> {
        let dir = match explicit {
            Some(d) => d.to_path_buf(),
            None => match std::env::var_os("HADOOP_CONF_DIR") {
                Some(d) if !d.is_empty() => PathBuf::from(d),
                _ => return Err(YarnError::NoConf),
            },
        };
        HadoopConf::load(&dir)
    }

    /// Reads `dir`'s `core-site.xml`, `hdfs-site.xml` and `yarn-site.xml`
    /// (those that exist; a directory with none of them is refused).
    pub fn load(dir: &Path) -> Result<HadoopConf> {
        let mut props = HashMap::new();
        let mut found = 0;
        for name in SHIPPED {
            let path = dir.join(name);
            let text = match std::fs::read_to_string(&path) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    return Err(YarnError::Local {
                        path: path.display().to_string(),
                        source: e,
                    })
                }
            };
            found += 1;
            parse_into(&text, &mut props).map_err(|why| YarnError::Conf {
                path: path.display().to_string(),
                why,
            })?;
        }
        if found == 0 {
            return Err(YarnError::Conf {
                path: dir.display().to_string(),
                why: "no core-site.xml or yarn-site.xml here: not a Hadoop configuration \
                      directory"
                    .into(),
            });
        }
        Ok(HadoopConf {
            dir: dir.to_path_buf(),
            props,
        })
    }

    /// A key's value, `${other}` references expanded.
    pub fn get(&self, key: &str) -> Option<String> {
        let mut v = self.props.get(key)?.clone();
        for _ in 0..8 {
            let Some(start) = v.find("${") else { break };
            let Some(len) = v[start..].find('}') else {
                break;
            };
            let name = &v[start + 2..start + len];
            let with = self.props.get(name).cloned().unwrap_or_default();
            v.replace_range(start..start + len + 1, &with);
        }
        Some(v)
    }

    /// `fs.defaultFS`, which must be an `hdfs://` file system: the
    /// staging directory lives there.
    pub fn default_fs(&self) -> Result<String> {
        match self.get("fs.defaultFS") {
            Some(fs) if fs.starts_with("hdfs://") => Ok(fs.trim_end_matches('/').to_owned()),
            Some(fs) => Err(self.bad(format!(
                "fs.defaultFS is {fs:?}: Sluice on YARN stages its files in HDFS (hdfs://)"
            ))),
            None => Err(self.bad("core-site.xml sets no fs.defaultFS".into())),
        }
    }

    /// The ResourceManager's web address, `http://HOST:PORT`
    /// (`yarn.resourcemanager.webapp.address`, by default
    /// `yarn.resourcemanager.hostname` on port 8088).
    pub fn rm_web(&self) -> Result<String> {
        let addr = match self.get("yarn.resourcemanager.webapp.address") {
            Some(a) => a,
            None => match self.get("yarn.resourcemanager.hostname") {
                Some(h) => format!("{h}:8088"),
                None => {
                    return Err(self.bad(
                        "yarn-site.xml names no ResourceManager \
                         (yarn.resourcemanager.webapp.address or yarn.resourcemanager.hostname)"
                            .into(),
                    ))
                }
            },
        };
        Ok(format!("http://{}", addr.trim()))
    }

    /// The class path entries containers find Hadoop's jars on
    /// (`yarn.application.classpath`, else Hadoop's default).
    pub fn app_classpath(&self) -> Vec<String> {
        let cp = self
            .get("yarn.application.classpath")
            .unwrap_or_else(|| DEFAULT_CLASSPATH.to_owned());
        cp.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    }

    fn bad(&self, why: String) -> YarnError {
        YarnError::Conf {
            path: self.dir.display().to_string(),
            why,
        }
    }
}

/// Adds the properties of one `*-site.xml` text to `props`.
fn parse_into(text: &str, props: &mut HashMap<String, String>) -> std::result::Result<(), String> {
    let doc = roxmltree::Document::parse(text).map_err(|e| e.to_string())?;
    let root = doc.root_element();
    if root.tag_name().name() != "configuration" {
        return Err(format!(
            "the root element is <{}>, not <configuration>",
            root.tag_name().name()
        ));
    }
    for p in root.children().filter(|n| n.has_tag_name("property")) {
        let field = |tag: &str| {
            p.children()
                .find(|n| n.has_tag_name(tag))
                .map(|n| n.text().unwrap_or("").trim().to_owned())
        };
        if let (Some(name), Some(value)) = (field("name"), field("value")) {
            props.insert(name, value);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(core: &str, yarn: &str) -> (tempfile::TempDir, HadoopConf) {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("core-site.xml"), core).unwrap();
        std::fs::write(d.path().join("yarn-site.xml"), yarn).unwrap();
        let c = HadoopConf::load(d.path()).unwrap();
        (d, c)
    }

    fn site(props: &[(&str, &str)]) -> String {
        let mut s = String::from("<?xml version=\"1.0\"?>\n<configuration>\n");
        for (k, v) in props {
            s.push_str(&format!(
                "<property><name>{k}</name><value>{v}</value></property>\n"
            ));
        }
        s + "</configuration>\n"
    }

    #[test]
    fn the_keys_read_with_hadoops_defaults_and_references_expanded() {
        let (_d, c) = conf(
            &site(&[("fs.defaultFS", "hdfs://nn:8020/")]),
            &site(&[("yarn.resourcemanager.hostname", "rm.example")]),
        );
        assert_eq!(c.default_fs().unwrap(), "hdfs://nn:8020");
        assert_eq!(c.rm_web().unwrap(), "http://rm.example:8088");
        assert!(c.app_classpath()[1].starts_with("{{HADOOP_COMMON_HOME}}"));
        let (_d, c) = conf(
            &site(&[("fs.defaultFS", "hdfs://nn:8020")]),
            &site(&[
                ("yarn.resourcemanager.hostname", "rm"),
                (
                    "yarn.resourcemanager.webapp.address",
                    "${yarn.resourcemanager.hostname}:9",
                ),
                ("yarn.application.classpath", "/a/*, /b/*"),
            ]),
        );
        assert_eq!(c.rm_web().unwrap(), "http://rm:9");
        assert_eq!(c.app_classpath(), ["/a/*", "/b/*"]);
    }

    #[test]
    fn bad_configurations_are_refused_clearly() {
        let (_d, c) = conf(&site(&[("fs.defaultFS", "file:///")]), &site(&[]));
        assert!(c.default_fs().unwrap_err().to_string().contains("HDFS"));
        assert!(c
            .rm_web()
            .unwrap_err()
            .to_string()
            .contains("names no ResourceManager"));
        let d = tempfile::tempdir().unwrap();
        let e = HadoopConf::load(d.path()).unwrap_err().to_string();
        assert!(e.contains("not a Hadoop configuration directory"), "{e}");
        std::fs::write(d.path().join("core-site.xml"), "<configuration>").unwrap();
        assert!(HadoopConf::load(d.path()).is_err());
        std::fs::write(d.path().join("core-site.xml"), "<conf/>").unwrap();
        let e = HadoopConf::load(d.path()).unwrap_err().to_string();
        assert!(e.contains("not <configuration>"), "{e}");
    }
}
