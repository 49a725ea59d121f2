//! `devprof trust`: the profiler images sidecars may run, by image ID, per endpoint.

use crate::cli::TrustArgs;
use crate::docker::trust::{self, short_id};
use crate::docker::Docker;
use crate::error::Result;

pub async fn run(args: TrustArgs) -> Result<()> {
    let path = trust::file()?;
    if args.list {
        let list = trust::read(&path)?;
        if list.endpoints.is_empty() {
            crate::outln!("no profiler image is trusted ({})", path.display());
        }
        for (endpoint, images) in &list.endpoints {
            crate::outln!("{endpoint}");
            for image in images {
                crate::outln!(
                    "  {}  {}  ({} {})",
                    short_id(&image.id),
                    image.name,
                    image.how,
                    image.at
                );
            }
        }
        return Ok(());
    }
    let docker = Docker::connect().await?;
    for image in &args.images {
        if args.forget {
            let id = match docker.image_details(image).await? {
                Some(details) => details.id,
                None => image.clone(),
            };
            let mut list = trust::read(&path)?;
            if list.remove(docker.address(), &id) {
                trust::write(&path, &list)?;
                crate::outln!(
                    "no longer trusted on {}: {image} ({})",
                    docker.address(),
                    short_id(&id)
                );
            } else {
                crate::outln!(
                    "{image} ({}) was not trusted on {}",
                    short_id(&id),
                    docker.address()
                );
            }
        } else {
            let id = docker.trust_image(image, image, "named").await?;
            crate::outln!(
                "trusted on {}: {image} (image {}); sidecars may now run it with perf's rights",
                docker.address(),
                short_id(&id)
            );
        }
    }
    crate::outln!("list: {}", path.display());
    Ok(())
}
