//! Upstream's implicit convergence at `done` (its runtime's `findConvergencePoint`): a
//! `fan_out_all` router whose every branch is one node with all its edges into `done` waits for
//! all of them and then finishes the run. Here a join is explicit, so that shape is rewritten,
//! before the checks, into the join it means: a `compute` node `ROUTER_at_done` with
//! `await: wait_all` whose output is the `with` keys of the branches' edges (each
//! `input.KEY`), or each branch node's output when they map none; the branches' edges go to it,
//! and it goes to `done` (docs/language.md "Older upstream forms").
use crate::ast;

/// Applies the rewrite to every router of `file` that has the shape.
pub(crate) fn at_done(file: &mut ast::File) {
    let routers: Vec<ast::Ident> = file
        .decls
        .iter()
        .filter_map(|d| match d {
            ast::Decl::Node(n) => match &n.body {
                ast::NodeBody::Router(r) if r.mode == ast::RouterMode::FanOutAll => {
                    Some(n.name.clone())
                }
                _ => None,
            },
            _ => None,
        })
        .collect();
    for router in routers {
        rewrite(file, &router);
    }
}

fn node<'a>(file: &'a ast::File, name: &str) -> Option<&'a ast::Node> {
    file.decls.iter().find_map(|d| match d {
        ast::Decl::Node(n) if n.name.name == name => Some(n),
        _ => None,
    })
}

fn has_await(n: &ast::Node) -> bool {
    match &n.body {
        ast::NodeBody::Agent(a) => a.await_.is_some(),
        ast::NodeBody::Tool(t) => t.await_.is_some(),
        ast::NodeBody::Subbot(s) => s.await_.is_some(),
        ast::NodeBody::Compute(c) => c.await_.is_some(),
        ast::NodeBody::Human(h) => h.await_.is_some(),
        ast::NodeBody::Router(_) => true,
        ast::NodeBody::Fail(_) => false,
    }
}

fn rewrite(file: &mut ast::File, router: &ast::Ident) {
    let join = format!("{}_at_done", router.name);
    if node(file, &join).is_some() {
        return;
    }
    let Some(wf) = file.decls.iter().find_map(|d| match d {
        ast::Decl::Workflow(w) => Some(w),
        _ => None,
    }) else {
        return;
    };
    let targets: Vec<&str> = wf
        .edges
        .iter()
        .filter(|e| e.from.name == router.name)
        .map(|e| e.to.name.as_str())
        .collect();
    let mut seen = std::collections::HashSet::new();
    let shaped = targets.len() >= 2
        && targets.iter().all(|t| {
            let Some(n) = node(file, t) else { return false };
            let outs: Vec<&ast::Edge> = wf.edges.iter().filter(|e| e.from.name == *t).collect();
            let ins = wf.edges.iter().filter(|e| e.to.name == *t).count();
            seen.insert(*t)
                && !has_await(n)
                && ins == 1
                && !outs.is_empty()
                && outs
                    .iter()
                    .all(|e| e.to.name == "done" && e.loop_.is_none())
        });
    if !shaped {
        return;
    }
    let targets: Vec<String> = targets.into_iter().map(str::to_owned).collect();
    let span = router.span;
    let mut keys: Vec<String> = Vec::new();
    let Some(ast::Decl::Workflow(wf)) = file
        .decls
        .iter_mut()
        .find(|d| matches!(d, ast::Decl::Workflow(_)))
    else {
        return;
    };
    for e in wf.edges.iter_mut() {
        if targets.contains(&e.from.name) && e.to.name == "done" {
            e.to = ast::Ident {
                name: join.clone(),
                span: e.to.span,
            };
            for (k, _) in e.with.iter().flat_map(|w| &w.entries) {
                if !keys.contains(&k.name) {
                    keys.push(k.name.clone());
                }
            }
        }
    }
    wf.edges.push(ast::Edge {
        from: ast::Ident {
            name: join.clone(),
            span,
        },
        to: ast::Ident {
            name: "done".to_owned(),
            span,
        },
        when: None,
        else_: None,
        loop_: None,
        with: None,
    });
    let fields: Vec<(String, String)> = if keys.is_empty() {
        targets
            .iter()
            .map(|t| (t.clone(), format!("outputs.{t}")))
            .collect()
    } else {
        keys.iter()
            .map(|k| (k.clone(), format!("input.{k}")))
            .collect()
    };
    let expr = fields
        .into_iter()
        .map(|(field, value)| {
            (
                ast::Ident { name: field, span },
                ast::StrLit {
                    value,
                    kind: ast::StrKind::Ident,
                    span,
                    lines: vec![ast::LineStart {
                        value_offset: 0,
                        line: span.line,
                        col: span.col,
                    }],
                },
            )
        })
        .collect();
    file.decls.push(ast::Decl::Node(ast::Node {
        kind: ast::NodeKind::Compute,
        kind_span: span,
        name: ast::Ident { name: join, span },
        body: ast::NodeBody::Compute(ast::ComputeProps {
            publish: None,
            input: None,
            output: None,
            join_output: None,
            await_: Some((ast::AwaitMode::WaitAll, span)),
            expr,
        }),
    }));
}
