//! `build:` specs (SANDBOX.md §4.4): the Dockerfile and context are resolved and contained
//! before any API call, the context is tarred, and the classic builder builds it under the
//! `image build` phase bound; the result is inspected like a pulled image.

use std::time::Instant;

use async_trait::async_trait;
use futures_util::StreamExt;
use iterion_sandbox::{
    Builder, Error, LogLevel, Phase, PreparedSpec, Result, RunInfo, build_image_tag,
    run_with_phase_timeout,
};

use crate::context::{resolve_build, tar_context_in};
use crate::driver::DockerDriver;
use crate::plan::build_request;
use crate::{engine_binary, render};

#[async_trait]
impl Builder for DockerDriver {
    /// SANDBOX.md §4.4: resolve and contain the Dockerfile and context (before any API call),
    /// tar the context, build it with the classic builder under `image build`, tag it
    /// `iterion-sandbox-build:<run id>`, then inspect it like a pulled image.
    async fn build(&self, prepared: PreparedSpec, info: &RunInfo) -> Result<PreparedSpec> {
        let Some(build) = prepared.spec.build.clone() else {
            return Ok(prepared);
        };
        let shared = &self.shared;
        prepared.check_driver(shared.engine.as_str())?;
        let workspace = info.workspace_path.clone();
        let (resolved, context_tar) = {
            let build = build.clone();
            tokio::task::spawn_blocking(move || {
                let resolved = resolve_build(&workspace, &build)?;
                let tar = tar_context_in(
                    &workspace,
                    &resolved.context,
                    &resolved.dockerfile_in_context,
                )?;
                Ok::<_, Error>((resolved, tar))
            })
            .await
            .map_err(|join| Error::Io {
                operation: "pack build context in",
                path: info.workspace_path.clone(),
                source: std::io::Error::other(join.to_string()),
            })??
        };
        let tag = build_image_tag(&info.run_id);
        let request = build_request(
            &build,
            &resolved.dockerfile_in_context,
            info,
            &tag,
            &shared.settings.extra_labels,
        );
        shared.log(
            LogLevel::Info,
            &render::render_build(shared.engine, &request, &resolved.context_written),
        );
        let started = Instant::now();
        run_with_phase_timeout(Phase::ImageBuild, shared.settings.build_timeout, async {
            let mut output = shared.api.build_image(request, context_tar.into());
            let mut tail = Tail::default();
            while let Some(item) = output.next().await {
                match item {
                    Ok(text) => {
                        // Streamed as it comes: the engine shows and stores it as the
                        // `sandbox.build` pseudo-node's output.
                        for line in text.lines().filter(|l| !l.trim().is_empty()) {
                            shared.log(LogLevel::Info, &format!("sandbox: build: {line}"));
                        }
                        tail.push(&text);
                    }
                    Err(error) => {
                        tail.push(&error.to_string());
                        return Err(Error::BuildFailed { tail: tail.text() });
                    }
                }
            }
            Ok(())
        })
        .await?;
        tracing::debug!(
            "sandbox: built {tag} in {} ms",
            started.elapsed().as_millis()
        );
        let config = shared
            .api
            .inspect_image(&tag)
            .await
            .map_err(shared.engine_error(format!("inspect image {tag}")))?
            .ok_or_else(|| Error::BuildFailed {
                tail: format!("the engine does not list {tag} after building it"),
            })?;
        engine_binary::check_engine_binary(&prepared.spec, &config.architecture).await?;
        let mut spec = prepared.spec;
        spec.build = None;
        spec.image = Some(tag.clone());
        Ok(PreparedSpec {
            spec,
            image: Some(tag),
            image_config: Some(config),
            ..prepared
        })
    }
}

/// The last [`OUTPUT_TAIL_BYTES`](iterion_sandbox::OUTPUT_TAIL_BYTES) of a build's output.
#[derive(Default)]
struct Tail(Vec<u8>);

impl Tail {
    fn push(&mut self, text: &str) {
        self.0.extend_from_slice(text.as_bytes());
        let excess = self
            .0
            .len()
            .saturating_sub(iterion_sandbox::OUTPUT_TAIL_BYTES);
        self.0.drain(..excess);
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0).trim().to_owned()
    }
}
