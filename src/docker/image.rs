//! Images: builds through the engine's build API (the context streamed up, the log
//! streamed down) and what `docker image inspect` says.

use super::{api_error, Docker};
use crate::error::{Error, Result};
use bytes::Bytes;
use futures_util::StreamExt;
use std::path::Path;

/// One image build through the engine's build API (the classic builder).
#[derive(Debug, Clone, Default)]
pub struct BuildRequest {
    /// Path of the Dockerfile inside the context.
    pub dockerfile: String,
    pub tag: String,
    pub build_args: std::collections::HashMap<String, String>,
    pub labels: std::collections::HashMap<String, String>,
    /// `host` lets RUN steps reach the network as the host does.
    pub network: String,
    pub no_cache: bool,
}

/// How a build ended, when the engine ran it.
#[derive(Debug, Clone, PartialEq)]
pub enum BuildEnd {
    /// The image id (`sha256:...`) when the engine reported it.
    Built(Option<String>),
    /// The engine's error message (the failing step is in the streamed log).
    Failed(String),
}

/// What `docker image inspect` says about an image.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ImageDetails {
    pub id: String,
    pub labels: std::collections::HashMap<String, String>,
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
    pub env: Vec<String>,
    pub user: String,
}

impl Docker {
    /// Builds an image from a tar context on disk, streaming the context up and the log
    /// down: each piece of build output goes to `on_output` as it arrives.
    pub async fn build_image(
        &self,
        request: &BuildRequest,
        context: &Path,
        mut on_output: impl FnMut(&str),
    ) -> Result<BuildEnd> {
        use bollard::query_parameters::BuildImageOptionsBuilder;
        let mut options = BuildImageOptionsBuilder::default()
            .dockerfile(&request.dockerfile)
            .t(&request.tag)
            .rm(true)
            .forcerm(true)
            .nocache(request.no_cache)
            .buildargs(&request.build_args)
            .labels(&request.labels);
        if !request.network.is_empty() {
            options = options.networkmode(&request.network);
        }
        let file = tokio::fs::File::open(context)
            .await
            .map_err(|e| Error::io(format!("open the build context {}", context.display()), e))?;
        let chunks = futures_util::stream::unfold(file, |mut file| async move {
            use tokio::io::AsyncReadExt;
            let mut buf = vec![0u8; 1 << 20];
            match file.read(&mut buf).await {
                Ok(0) => None,
                Ok(n) => {
                    buf.truncate(n);
                    Some((Ok::<Bytes, std::io::Error>(Bytes::from(buf)), file))
                }
                Err(e) => Some((Err(e), file)),
            }
        });
        let mut stream = self.client.build_image(
            options.build(),
            None,
            Some(bollard::body_try_stream(chunks)),
        );
        let mut image_id = None;
        while let Some(item) = stream.next().await {
            match item {
                Ok(info) => {
                    if let Some(text) = info.stream.as_deref() {
                        on_output(text);
                    }
                    if let Some(status) = info.status.as_deref() {
                        on_output(&format!("{status}\n"));
                    }
                    if let Some(id) = info.aux.and_then(|a| a.id) {
                        image_id = Some(id);
                    }
                }
                Err(bollard::errors::Error::DockerStreamError { error }) => {
                    return Ok(BuildEnd::Failed(error));
                }
                Err(bollard::errors::Error::DockerResponseServerError { message, .. }) => {
                    return Ok(BuildEnd::Failed(message));
                }
                Err(e) => return Err(api_error(&format!("build {}", request.tag), e)),
            }
        }
        Ok(BuildEnd::Built(image_id))
    }

    /// An image's configuration; None when the engine does not have it.
    pub async fn image_details(&self, image: &str) -> Result<Option<ImageDetails>> {
        match self.client.inspect_image(image).await {
            Ok(i) => {
                let config = i.config.unwrap_or_default();
                Ok(Some(ImageDetails {
                    id: i.id.unwrap_or_default(),
                    labels: config.labels.unwrap_or_default(),
                    entrypoint: config.entrypoint.unwrap_or_default(),
                    cmd: config.cmd.unwrap_or_default(),
                    env: config.env.unwrap_or_default(),
                    user: config.user.unwrap_or_default(),
                }))
            }
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => Ok(None),
            Err(e) => Err(api_error(&format!("inspect image {image}"), e)),
        }
    }

    /// Tags of the images the engine has (for trials that need any image).
    pub async fn image_tags(&self) -> Result<Vec<String>> {
        let images = self
            .client
            .list_images(None::<bollard::query_parameters::ListImagesOptions>)
            .await
            .map_err(|e| api_error("list images", e))?;
        Ok(images
            .into_iter()
            .flat_map(|i| i.repo_tags)
            .filter(|t| t != "<none>:<none>")
            .collect())
    }

    /// Whether an image is present locally.
    pub async fn has_image(&self, image: &str) -> bool {
        self.client.inspect_image(image).await.is_ok()
    }
}
