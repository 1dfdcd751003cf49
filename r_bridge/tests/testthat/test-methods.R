# The R conventions of a dp_result: broom's tidy and glance, vcov, nobs, confint, print and summary, and the
# uninformative flag, each checked against the Python PrivateResult made with the same data and seed.
#
# The releases: lwage ~ educ + exper + exper^2 on mroz (428 rows with a wage), coefficient educ, bounds
# educ in [0, 20]. At epsilon 1 (seed 1) the release is uninformative (fwl_score cannot standardise four
# columns of 428 rows at that budget and releases 0 with an infinite interval); at epsilon 10
# (seed 1) it is informative. The means of educ and age on mroz (753 rows) at epsilon 0.02 and 0.03 have finite
# intervals wider than the public ranges (uninformative), at 0.01 they are declined, at 1 informative.

mroz_release <- function(epsilon, seed = 1) {
  mroz <- mroz_data()
  r <- quiet_missing(seeded(dp_coef(MROZ_FORMULA, mroz, coef = "educ", epsilon = epsilon,
                                    bounds = list(educ = c(0, 20)), seed = seed)))
  dp <- reticulate::import("dpstats", convert = FALSE)
  py <- py_seeded(dp$private_coef(reticulate::r_to_py(mroz), "lwage ~ educ + exper + I(exper**2)", coef = "educ",
                                  epsilon = epsilon, bounds = reticulate::dict(educ = c(0, 20)),
                                  seed = as.integer(seed)))
  list(r = r, py = py)
}

py_val <- function(x) reticulate::py_to_r(x)

# Python's tidy() as an R list of columns (through to_dict: reticulate 1.28 cannot convert numpy 2 arrays)
py_tidy <- function(py, level = 0.95) {
  cols <- py_val(py$tidy(level = level)$to_dict(orient = "list"))
  lapply(cols, unlist)
}

# the flag, reason, terms and fallback as the Python object gives them: the bool property uninformative, the
# property uninformative_reason, the method uninformative_terms(level) and the fields fallback, fallback_terms
py_flag <- function(py, level = 0.95) {
  list(
    uninformative = py_val(py$uninformative),
    reason = py_val(py$uninformative_reason),
    terms = as.character(unlist(py_val(py$uninformative_terms(level)))),
    fallback = py_val(py$fallback),
    fallback_terms = as.character(unlist(py_val(py$fallback_terms)))
  )
}

# means of educ and age on mroz (753 rows), bounds educ in [0, 20] and age in [18, 65], seeded, in R and Python
mean_release <- function(epsilon, seed = 1) {
  mroz <- mroz_data()
  bounds <- list(educ = c(0, 20), age = c(18, 65))
  r <- seeded(dp_mean(mroz, c("educ", "age"), epsilon = epsilon, bounds = bounds, seed = seed))
  dp <- reticulate::import("dpstats", convert = FALSE)
  py <- py_seeded(dp$private_mean(reticulate::r_to_py(mroz), list("educ", "age"), epsilon = epsilon,
                                  bounds = reticulate::dict(educ = c(0, 20), age = c(18, 65)),
                                  seed = as.integer(seed)))
  list(r = r, py = py)
}

test_that("the two releases: uninformative at epsilon 1, informative at epsilon 10, as in Python", {
  u <- mroz_release(1)
  i <- mroz_release(10)
  fu <- py_flag(u$py)
  fi <- py_flag(i$py)
  expect_true(fu$uninformative)
  expect_false(fi$uninformative)
  expect_true(u$r$uninformative)
  expect_false(i$r$uninformative)
  expect_identical(u$r$uninformative_terms, fu$terms)
  expect_identical(u$r$uninformative_terms, "educ")
  expect_identical(i$r$uninformative_terms, character())
  expect_type(u$r$uninformative_reason, "character")
  expect_false(is.na(u$r$uninformative_reason))
  expect_true(nzchar(u$r$uninformative_reason))
  expect_identical(i$r$uninformative_reason, NA_character_)
  expect_identical(u$r$uninformative_reason, fu$reason)
  expect_null(fi$reason)
  # the fallback as Python says it: fwl_score releases 0 when its private standardisation fails, and (where the
  # method reports it as details["fallback"]) the release is a fallback replacing educ
  expect_identical(u$r$fallback, if (is.null(fu$fallback)) NA_character_ else fu$fallback)
  expect_identical(u$r$fallback_terms, if (is.null(fu$fallback)) character() else "educ")
  expect_null(fi$fallback)
  expect_identical(i$r$fallback, NA_character_)
  expect_identical(i$r$fallback_terms, character())
  expect_s3_class(u$r$python, "python.builtin.object")
})

test_that("broom::tidy gives broom's columns with the values of Python's tidy()", {
  skip_if_not_installed("broom")
  for (eps in c(1, 10)) {
    rel <- mroz_release(eps)
    td <- broom::tidy(rel$r)
    expect_s3_class(td, "data.frame")
    expect_identical(names(td), c("term", "estimate", "std.error", "conf.low", "conf.high", "epsilon", "delta",
                                  "method", "interpretation", "uninformative"))
    # Python's tidy() columns, and the flag per term
    py <- py_tidy(rel$py)
    expect_identical(setdiff(names(td), "uninformative"), names(py))
    expect_identical(td$uninformative, eps == 1)
    for (col in names(py)) {
      # the interval's ends by R's quantile function, to the last digits of Python's
      if (col %in% c("conf.low", "conf.high")) {
        expect_equal(td[[col]], py[[col]], tolerance = 1e-12, label = paste0("tidy column ", col))
      } else {
        expect_identical(td[[col]], py[[col]], label = paste0("tidy column ", col))
      }
    }
    # at another level, and without the interval
    td90 <- broom::tidy(rel$r, conf.level = 0.9)
    py90 <- py_tidy(rel$py, level = 0.9)
    expect_equal(td90$conf.low, py90[["conf.low"]], tolerance = 1e-12)
    expect_equal(td90$conf.high, py90[["conf.high"]], tolerance = 1e-12)
    expect_identical(names(broom::tidy(rel$r, conf.int = FALSE)),
                     c("term", "estimate", "std.error", "epsilon", "delta", "method", "interpretation",
                       "uninformative"))
    # the same function through dpstats' re-export; dp_tidy is Python's tidy() without the flag
    expect_identical(tidy(rel$r), td)
    expect_identical(dp_tidy(rel$r), td[names(py)])
  }
  i <- mroz_release(10)$r
  expect_true(all(is.finite(unlist(broom::tidy(i)[c("estimate", "std.error", "conf.low", "conf.high")]))))
  expect_equal(broom::tidy(i)$conf.low, unname(confint(i)[, 1]))
  expect_error(broom::tidy(i, conf.level = 1), "level must lie in (0, 1)", fixed = TRUE)
  expect_error(broom::tidy(i, conf.int = NA), "conf.int must be TRUE or FALSE", fixed = TRUE)
})

test_that("broom::glance gives one row with the public facts and the flag", {
  skip_if_not_installed("broom")
  u <- mroz_release(1)
  i <- mroz_release(10)
  cols <- c("nobs", "d", "epsilon", "delta", "method", "interpretation", "declined", "uninformative",
            "uninformative_reason", "fallback")
  for (rel in list(u, i)) {
    g <- broom::glance(rel$r)
    expect_s3_class(g, "data.frame")
    expect_identical(names(g), cols)
    expect_identical(nrow(g), 1L)
    expect_identical(g$nobs, py_val(rel$py$n))
    expect_identical(g$nobs, 428L)
    expect_identical(g$d, py_val(rel$py$d))
    expect_identical(g$epsilon, py_val(rel$py$epsilon))
    expect_identical(g$delta, py_val(rel$py$delta))
    expect_identical(g$method, py_val(rel$py$method))
    expect_identical(g$interpretation, "standard")
    expect_false(g$declined)
    expect_type(g$uninformative, "logical")
    expect_type(g$uninformative_reason, "character")
    expect_type(g$fallback, "character")
    expect_identical(g$uninformative, py_flag(rel$py)$uninformative)
    expect_identical(glance(rel$r), g)
  }
  gu <- broom::glance(u$r)
  expect_true(gu$uninformative)
  expect_identical(gu$uninformative_reason, u$r$uninformative_reason)
  expect_false(is.na(gu$uninformative_reason))
  gi <- broom::glance(i$r)
  expect_false(gi$uninformative)
  expect_true(is.na(gi$uninformative_reason))
})

test_that("vcov: squared standard errors on the diagonal, NA off it, named by the terms", {
  i <- mroz_release(10)
  v <- vcov(i$r)
  expect_identical(dimnames(v), list("educ", "educ"))
  expect_identical(v[1, 1], py_val(i$py$std_error)^2)
  expect_identical(unname(sqrt(diag(vcov(mroz_release(1)$r)))), Inf)
  # several terms: the covariances are not released, so NA rather than 0
  mroz <- mroz_data()
  o <- seeded(dp_mean(mroz, c("educ", "age"), epsilon = 10, seed = 1,
                      bounds = list(educ = c(0, 20), age = c(18, 65))))
  # with several terms a note says the covariances are unknown; with one there is nothing off the diagonal
  expect_message(vo <- vcov(o), "off-diagonal entries are NA (unknown), not 0", fixed = TRUE,
                 class = "dpstats_vcov_na")
  expect_no_message(vcov(i$r))
  expect_identical(dimnames(vo), list(names(coef(o)), names(coef(o))))
  expect_identical(unname(diag(vo)), unname(o$std_error)^2)
  expect_true(all(is.na(vo[row(vo) != col(vo)])))
  expect_true(all(!is.na(diag(vo))))
  # no interval, no vcov
  plain <- seeded(dp_mean(mroz, "educ", epsilon = 1, seed = 1, bounds = list(educ = c(0, 20)), inference = FALSE))
  expect_error(vcov(plain), "vcov: method 'adaptive_whiten' was run without an interval", class = "dpstats_error")
})

test_that("nobs and coef give the public number of rows and the private estimates", {
  i <- mroz_release(10)
  expect_identical(nobs(i$r), 428L)
  expect_identical(stats::nobs(i$r), py_val(i$py$n))
  expect_identical(coef(i$r), c(educ = py_val(i$py$estimate)))
  m <- seeded(dp_mean(mroz_data(), c("educ", "age"), epsilon = 1, seed = 2,
                      bounds = list(educ = c(0, 20), age = c(18, 65))))
  expect_identical(nobs(m), 753L)
})

test_that("print shows the estimate, the standard error, the interval and the uninformative flag with its reason", {
  u <- mroz_release(1)$r
  i <- mroz_release(10)$r
  pu <- paste(capture.output(print(u)), collapse = "\n")
  pi <- paste(capture.output(print(i)), collapse = "\n")
  for (p in c(pu, pi)) {
    expect_match(p, "std. error", fixed = TRUE)
    expect_match(p, "95% interval", fixed = TRUE)
  }
  ci <- unclass(confint(i))
  expect_match(pi, formatC(unname(i$std_error), digits = 6, format = "g"), fixed = TRUE)
  expect_match(pi, formatC(unname(coef(i)), digits = 6, format = "g"), fixed = TRUE)
  expect_match(pi, paste0("[", formatC(ci[1, 1], digits = 6, format = "g"), ", ",
                          formatC(ci[1, 2], digits = 6, format = "g"), "]"), fixed = TRUE)
  expect_false(grepl("uninformative", pi, ignore.case = TRUE))
  # the uninformative release: infinite standard error and interval, the flag and the reason
  expect_match(pu, "educ +0 +Inf +\\[-Inf, Inf\\]")
  expect_match(pu, "Uninformative (educ)", fixed = TRUE)
  reason_words <- strsplit(u$uninformative_reason, "\\s+")[[1]]
  expect_match(gsub("\\s+", " ", pu), paste(reason_words, collapse = " "), fixed = TRUE)
  # the fallback, in the reason or on its own line
  if (!is.na(u$fallback)) {
    expect_match(gsub("\\s+", " ", pu), gsub("\\s+", " ", sub("\\.$", "", u$fallback)), fixed = TRUE)
  }
  # without an interval print says so
  plain <- seeded(dp_mean(mroz_data(), "educ", epsilon = 1, seed = 1, bounds = list(educ = c(0, 20)),
                          inference = FALSE))
  expect_output(print(plain), "no standard error released")
})

test_that("summary shows the uninformative flag", {
  u <- mroz_release(1)$r
  i <- mroz_release(10)$r
  su <- paste(capture.output(print(summary(u))), collapse = "\n")
  si <- paste(capture.output(print(summary(i))), collapse = "\n")
  expect_match(su, "uninformative", ignore.case = TRUE)
  expect_false(grepl("uninformative", si, ignore.case = TRUE))
  expect_match(si, formatC(unname(i$std_error), digits = 6, format = "g"), fixed = TRUE)
})

test_that("confint: a message and an attribute when the interval is uninformative", {
  u <- mroz_release(1)
  i <- mroz_release(10)
  expect_message(cu <- confint(u$r), "confint: the interval is uninformative for educ", fixed = TRUE,
                 class = "dpstats_uninformative")
  expect_true(attr(cu, "uninformative"))
  expect_identical(attr(cu, "uninformative_terms"), "educ")
  expect_identical(attr(cu, "uninformative_reason"), u$r$uninformative_reason)
  expect_identical(unname(unclass(cu)[1, ]), c(-Inf, Inf))
  expect_output(print(cu), "uninformative (educ)", fixed = TRUE)
  expect_no_message(ci <- confint(i$r))
  expect_false(attr(ci, "uninformative"))
  expect_identical(attr(ci, "uninformative_terms"), character())
  expect_identical(attr(ci, "uninformative_reason"), NA_character_)
  out <- capture.output(print(ci))
  expect_false(any(grepl("uninformative", out)))
  # the ends and the flag at another level, as in Python
  ci90 <- confint(i$r, level = 0.9)
  pyci <- py_val(i$py$conf_int(level = 0.9)$to_dict(orient = "list"))
  expect_equal(unname(unclass(ci90)[1, ]), c(unlist(pyci[["conf.low"]]), unlist(pyci[["conf.high"]])),
               tolerance = 1e-12)
  expect_identical(attr(ci90, "uninformative_terms"), py_flag(i$py, 0.9)$terms)
  expect_message(c50 <- confint(u$r, level = 0.5), class = "dpstats_uninformative")
  expect_identical(attr(c50, "uninformative_terms"), py_flag(u$py, 0.5)$terms)
  expect_identical(rownames(confint(i$r, "educ")), "educ")
  # a result read back in another session (its Python object gone) still flags its infinite interval
  f <- tempfile(fileext = ".rds")
  saveRDS(u$r, f)
  back <- readRDS(f)
  unlink(f)
  expect_message(cb <- confint(back, level = 0.9), class = "dpstats_uninformative")
  expect_identical(attr(cb, "uninformative_terms"), "educ")
  expect_output(print(back), "Uninformative (educ)", fixed = TRUE)
})

test_that("a tiny epsilon: finite intervals wider than the bounds are flagged, per term and by level", {
  skip_if_not_installed("broom")
  w <- mean_release(0.02)
  f <- py_flag(w$py)
  expect_true(f$uninformative)
  expect_identical(f$terms, c("educ", "age"))
  expect_null(f$fallback)
  # the intervals are finite but wider than the public ranges, 20 and 47
  ci <- suppressMessages(confint(w$r))
  expect_true(all(is.finite(unclass(ci))))
  expect_true(all(ci[, 2] - ci[, 1] >= c(20, 47)))
  expect_true(w$r$uninformative)
  expect_identical(w$r$uninformative_terms, c("educ", "age"))
  expect_identical(w$r$uninformative_reason, f$reason)
  expect_match(w$r$uninformative_reason, "wider than the range the public bounds allow", fixed = TRUE)
  expect_identical(broom::tidy(w$r)$uninformative, c(TRUE, TRUE))
  expect_true(broom::glance(w$r)$uninformative)
  expect_message(confint(w$r), "confint: the interval is uninformative for educ, age", fixed = TRUE,
                 class = "dpstats_uninformative")
  p <- paste(capture.output(print(w$r)), collapse = "\n")
  expect_match(p, "Uninformative (educ, age)", fixed = TRUE)
  expect_match(paste(capture.output(print(summary(w$r))), collapse = "\n"), "Uninformative:", fixed = TRUE)
  # at epsilon 0.035 the 95% intervals are too wide, the 90% ones are not, as Python's uninformative_terms says
  t <- mean_release(0.035)
  expect_identical(py_flag(t$py, 0.95)$terms, c("educ", "age"))
  expect_identical(py_flag(t$py, 0.9)$terms, character())
  expect_identical(broom::tidy(t$r)$uninformative, c(TRUE, TRUE))
  expect_identical(broom::tidy(t$r, conf.level = 0.9)$uninformative, c(FALSE, FALSE))
  expect_no_message(c90 <- confint(t$r, level = 0.9))
  expect_false(attr(c90, "uninformative"))
  # epsilon 1: informative
  ok <- mean_release(1)
  expect_false(py_flag(ok$py)$uninformative)
  expect_false(ok$r$uninformative)
  expect_identical(broom::tidy(ok$r)$uninformative, c(FALSE, FALSE))
  expect_false(grepl("ninformative", paste(capture.output(print(ok$r)), collapse = "\n")))
})

test_that("a declined release: uninformative, every term flagged, no interval or vcov", {
  skip_if_not_installed("broom")
  d <- mean_release(0.01)
  f <- py_flag(d$py)
  expect_true(py_val(d$py$declined))
  expect_true(f$uninformative)
  expect_true(d$r$declined)
  expect_true(d$r$uninformative)
  expect_identical(d$r$uninformative_reason, f$reason)
  expect_match(d$r$uninformative_reason, "The method declined", fixed = TRUE)
  td <- broom::tidy(d$r)
  expect_true(all(is.na(td$estimate)))
  expect_identical(td$uninformative, c(TRUE, TRUE))
  g <- broom::glance(d$r)
  expect_true(g$declined)
  expect_true(g$uninformative)
  expect_identical(g$nobs, 753L)
  expect_identical(nobs(d$r), 753L)
  expect_output(print(d$r), "Uninformative: The method declined", fixed = TRUE)
  expect_error(vcov(d$r), "vcov: the method declined to release", class = "dpstats_error")
  expect_error(confint(d$r), "confint: the method declined to release", class = "dpstats_error")
})
