# The benchmark, through dpstats' command line in reticulate's Python.

# The library path R prepends to LD_LIBRARY_PATH at start-up (Linux). A Python
# built with a shared libpython (pyenv, for instance) would otherwise load the
# system's libpython from /usr/lib/<arch> in a child process, and with it the
# wrong site-packages.
dp_r_ld_prefix <- function() {
  rld <- Sys.getenv("R_LD_LIBRARY_PATH")
  if (nzchar(rld)) return(rld)
  ldpaths <- file.path(R.home("etc"), "ldpaths")
  if (!file.exists(ldpaths)) return("")
  script <- paste0("unset LD_LIBRARY_PATH R_LD_LIBRARY_PATH; R_HOME=", shQuote(R.home()), "; . ", shQuote(ldpaths),
                   "; printf '%s' \"$R_LD_LIBRARY_PATH\"")
  out <- tryCatch(suppressWarnings(system2("sh", c("-c", shQuote(script)), stdout = TRUE, stderr = FALSE)),
                  error = function(e) character())
  if (length(out) == 1L) out else ""
}

dp_child_env <- function() {
  if (!identical(Sys.info()[["sysname"]], "Linux")) return(character())
  ld <- Sys.getenv("LD_LIBRARY_PATH")
  prefix <- dp_r_ld_prefix()
  if (!nzchar(ld) || !nzchar(prefix)) return(character())
  # R started from R (R CMD check) prepends its entries again: drop them wherever they are
  r_entries <- strsplit(prefix, ":", fixed = TRUE)[[1]]
  entries <- strsplit(ld, ":", fixed = TRUE)[[1]]
  rest <- entries[!(entries %in% r_entries) & nzchar(entries)]
  paste0("LD_LIBRARY_PATH=", shQuote(paste(rest, collapse = ":")))
}

dp_cli <- function(command, args, call) {
  dp_python()
  python <- reticulate::py_exe()
  out <- suppressWarnings(system2(python, c("-m", "dpstats", command, shQuote(args)), stdout = TRUE,
                                  stderr = TRUE, env = dp_child_env()))
  status <- attr(out, "status")
  if (!is.null(status) && status != 0L) {
    tail <- paste(utils::tail(out, 20L), collapse = "\n")
    stop(dp_condition(paste0("dpstats ", command, " failed (exit status ", status, "):\n", tail),
                      c("dpstats_cli_error", "dpstats_error", "error"), call = call, status = status,
                      output = out))
  }
  out
}

dp_flag <- function(name, value) {
  if (is.null(value)) return(character())
  if (is.logical(value)) return(if (isTRUE(value)) paste0("--", name) else character())
  c(paste0("--", name), as.character(value))
}

#' Run the benchmark
#'
#' Runs \code{dpstats bench} (every algorithm on every instance at every
#' privacy level and seed, in worker processes under time and memory
#' limits) with the Python that reticulate uses, then optionally
#' \code{dpstats report}. A run that is interrupted resumes when the same
#' call is repeated.
#'
#' @param results The results file (SQLite).
#' @param corpus A corpus folder, or \code{NULL} for the public corpus.
#' @param task,algorithm,instance Character vectors selecting tasks,
#'   algorithms and instances (\code{NULL}: all).
#' @param epsilon Numeric vector of privacy levels (\code{NULL}: the protocol's).
#' @param delta The delta of every trial (\code{NULL}: 1e-6).
#' @param trials Seeds per instance and epsilon (\code{NULL}: the corpus's).
#' @param workers Local worker processes (\code{NULL}: the CPUs available).
#' @param preset \code{"quick"} or \code{"full"} (\code{NULL}: full).
#' @param time_limit,memory_limit Per-trial limits in seconds and MB.
#' @param report A folder: when given, \code{dpstats report} writes
#'   \code{trials.csv}, \code{leaderboard.csv} and \code{profiles.csv} there.
#' @param site Whether the report also writes the static HTML site.
#' @param args Further command-line arguments for \code{dpstats bench}.
#' @return Invisibly, the path of the results file, with the command's output
#'   in \code{attr(, "output")} and, when \code{report} is given, the path of
#'   \code{leaderboard.csv} in \code{attr(, "leaderboard")}.
#' @section Errors:
#' A failing command raises an error of class \code{dpstats_cli_error} (and
#' \code{dpstats_error}) with the end of its output.
#' @examples
#' \dontrun{
#' res <- dp_bench(tempfile(fileext = ".sqlite"), instance = "mroz87_lwage",
#'                 algorithm = "adassp_std", epsilon = 1, trials = 2,
#'                 report = file.path(tempdir(), "report"))
#' dp_leaderboard(attr(res, "leaderboard"))
#' }
#' @export
dp_bench <- function(results = "results/bench.sqlite", corpus = NULL, task = NULL, algorithm = NULL,
                     instance = NULL, epsilon = NULL, delta = NULL, trials = NULL, workers = NULL, preset = NULL,
                     time_limit = NULL, memory_limit = NULL, report = NULL, site = FALSE, args = character()) {
  call <- sys.call()
  results <- normalizePath(results, mustWork = FALSE)
  a <- c(dp_flag("results", results), dp_flag("corpus", if (is.null(corpus)) NULL else normalizePath(corpus)),
         dp_flag("task", task), dp_flag("algorithm", algorithm), dp_flag("instance", instance),
         dp_flag("epsilon", if (is.null(epsilon)) NULL else format(epsilon, digits = 15)),
         dp_flag("delta", if (is.null(delta)) NULL else format(delta, digits = 15)), dp_flag("trials", trials),
         dp_flag("workers", workers), dp_flag("preset", preset), dp_flag("time-limit", time_limit),
         dp_flag("memory-limit", memory_limit), "--no-progress", args)
  out <- dp_cli("bench", a, call)
  value <- results
  attr(value, "output") <- out
  if (!is.null(report)) {
    out2 <- dp_report(results, report, corpus = corpus, site = site)
    attr(value, "output") <- c(out, attr(out2, "output"))
    attr(value, "leaderboard") <- as.character(out2)
  }
  invisible(value)
}

#' Write the benchmark report
#'
#' Runs \code{dpstats report} on a results file.
#'
#' @param results The results file (SQLite from \code{\link{dp_bench}}, or a
#'   \code{trials.csv}).
#' @param out The output folder.
#' @param corpus The corpus the results are of (\code{NULL}: the public one).
#' @param site Whether to write the static HTML site too.
#' @return Invisibly, the path of \code{leaderboard.csv}.
#' @export
dp_report <- function(results, out, corpus = NULL, site = FALSE) {
  a <- c(dp_flag("results", normalizePath(results, mustWork = FALSE)),
         dp_flag("out", normalizePath(out, mustWork = FALSE)),
         dp_flag("corpus", if (is.null(corpus)) NULL else normalizePath(corpus)), if (!site) "--no-site")
  output <- dp_cli("report", a, sys.call())
  path <- file.path(normalizePath(out, mustWork = FALSE), "leaderboard.csv")
  attr(path, "output") <- output
  invisible(path)
}

#' Read a leaderboard
#'
#' @param path \code{leaderboard.csv}, or the report folder holding it.
#' @return A data.frame with one row per task, privacy level, slice and
#'   algorithm: \code{tau50} (the error, in baseline units, that the
#'   algorithm stays under on half of the study-weighted instances; \code{Inf}
#'   when it never does), \code{reaches}, \code{rank} (\code{NA} for
#'   algorithms that are not differentially private), and the counts.
#' @examples
#' \dontrun{
#' lb <- dp_leaderboard("report")
#' subset(lb, task == "sce" & epsilon == 1 & slice == "all")
#' }
#' @export
dp_leaderboard <- function(path) {
  if (dir.exists(path)) path <- file.path(path, "leaderboard.csv")
  if (!file.exists(path)) {
    stop(dp_condition(paste0("no leaderboard at ", path, "; run dp_bench(..., report = <folder>) or dp_report()"),
                      c("dpstats_error", "error"), call = sys.call()))
  }
  df <- utils::read.csv(path, stringsAsFactors = FALSE, na.strings = c("", "NA"))
  for (col in intersect(c("tau50", "reaches", "epsilon"), names(df))) {
    if (is.character(df[[col]])) df[[col]] <- as.numeric(df[[col]])
  }
  df
}
