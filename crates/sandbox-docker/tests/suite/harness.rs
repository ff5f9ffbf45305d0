//! The harness itself: the engine answers, the locally built test images exist and work, and test
//! containers are labelled and cleaned up. If these fail, every other container test would too,
//! so they say precisely which piece of `scripts/test.sh` is missing.

use bollard::models::ContainerCreateBody;
use iterion_test_support::{
    BUSYBOX_IMAGE, ContainerGuard, ContainerOutput, DEBIAN_IMAGE, TEST_ID_LABEL, TEST_IMAGE_LABEL,
    collect_logs, docker_or_skip, label_for_test, run_to_completion, test_container_ids,
    wait_for_exit,
};
use pretty_assertions::assert_eq;

#[tokio::test]
async fn docker_busybox_container_runs_a_command() {
    const TEST_ID: &str = "iterion-sandbox::harness::docker_busybox_container_runs_a_command";
    let Some(docker) = docker_or_skip(TEST_ID).await else {
        return;
    };

    // Each step spelled out with bollard, so a failure names the step.
    let body = label_for_test(
        ContainerCreateBody {
            image: Some(BUSYBOX_IMAGE.to_owned()),
            cmd: Some(vec![
                "sh".to_owned(),
                "-c".to_owned(),
                "echo hello-from-busybox; uname -s".to_owned(),
            ]),
            ..Default::default()
        },
        TEST_ID,
    );
    let created = docker
        .create_container(None, body)
        .await
        .expect("create from the busybox test image (built by scripts/build-test-images.sh)");
    let guard = ContainerGuard::new(created.id);

    let labels = docker
        .inspect_container(guard.id(), None)
        .await
        .expect("inspect the new container")
        .config
        .and_then(|config| config.labels)
        .unwrap_or_default();
    assert_eq!(labels.get(TEST_ID_LABEL).map(String::as_str), Some(TEST_ID));

    docker
        .start_container(guard.id(), None)
        .await
        .expect("start the container");
    let exit_code = wait_for_exit(&docker, guard.id()).await;
    let (stdout, stderr) = collect_logs(&docker, guard.id()).await;
    assert_eq!(
        ContainerOutput {
            exit_code,
            stdout,
            stderr
        },
        ContainerOutput {
            exit_code: 0,
            stdout: "hello-from-busybox\nLinux\n".to_owned(),
            stderr: String::new(),
        }
    );

    // The guard removes the container, and nothing else labelled with this test is left behind.
    drop(guard);
    assert_eq!(
        test_container_ids(&docker, TEST_ID).await,
        Vec::<String>::new()
    );
}

#[tokio::test]
async fn docker_debian_image_has_bash_curl_git_jq_and_a_uid_1000_user() {
    const TEST_ID: &str =
        "iterion-sandbox::harness::docker_debian_image_has_bash_curl_git_jq_and_a_uid_1000_user";
    let Some(docker) = docker_or_skip(TEST_ID).await else {
        return;
    };

    let output = run_to_completion(
        &docker,
        TEST_ID,
        DEBIAN_IMAGE,
        &[
            "bash",
            "-c",
            r#"set -e
               command -v bash curl git jq
               echo '{"tool":"jq"}' | jq -r .tool
               git --version | cut -d' ' -f1-2
               curl --version | head -n1 | cut -d' ' -f1
               id -u user; id -g user
               echo "$BASH_VERSION" | cut -d. -f1"#,
        ],
    )
    .await;
    assert_eq!(
        output,
        ContainerOutput {
            exit_code: 0,
            stdout: [
                "/usr/bin/bash",
                "/usr/bin/curl",
                "/usr/bin/git",
                "/usr/bin/jq",
                "jq",
                "git version",
                "curl",
                "1000",
                "1000",
                "5",
                "",
            ]
            .join("\n"),
            stderr: String::new(),
        }
    );
    assert_eq!(
        test_container_ids(&docker, TEST_ID).await,
        Vec::<String>::new()
    );
}

#[tokio::test]
async fn docker_test_images_are_labelled_and_run_as_uid_1000() {
    const TEST_ID: &str =
        "iterion-sandbox::harness::docker_test_images_are_labelled_and_run_as_uid_1000";
    let Some(docker) = docker_or_skip(TEST_ID).await else {
        return;
    };

    for image in [BUSYBOX_IMAGE, DEBIAN_IMAGE] {
        let label = docker
            .inspect_image(image)
            .await
            .unwrap_or_else(|e| panic!("{image} missing ({e}): run scripts/build-test-images.sh"))
            .config
            .and_then(|config| config.labels)
            .and_then(|labels| labels.get(TEST_IMAGE_LABEL).cloned());
        assert_eq!((image, label.as_deref()), (image, Some("1")));

        // The image's user database resolves `user` to 1000:1000 when a container runs as it.
        let body = label_for_test(
            ContainerCreateBody {
                image: Some(image.to_owned()),
                user: Some("user".to_owned()),
                cmd: Some(vec![
                    "sh".to_owned(),
                    "-c".to_owned(),
                    "id -u; id -g; echo $HOME; touch /tmp/x && echo tmp-writable".to_owned(),
                ]),
                ..Default::default()
            },
            TEST_ID,
        );
        let created = docker
            .create_container(None, body)
            .await
            .unwrap_or_else(|e| panic!("create from {image}: {e}"));
        let guard = ContainerGuard::new(created.id);
        docker
            .start_container(guard.id(), None)
            .await
            .unwrap_or_else(|e| panic!("start from {image}: {e}"));
        let exit_code = wait_for_exit(&docker, guard.id()).await;
        let (stdout, stderr) = collect_logs(&docker, guard.id()).await;
        assert_eq!(
            (image, exit_code, stdout.as_str(), stderr.as_str()),
            (image, 0, "1000\n1000\n/home/user\ntmp-writable\n", "")
        );
    }
}
