mod bindless;
mod budget;
mod fanout;
mod loops;
mod routing;
mod support;
mod tools;
mod worktree;
