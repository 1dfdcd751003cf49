test_that("dp_coef gives the same release as Python on the same data frame and seed", { quiet_missing({
  # epsilon 3: at epsilon 1 the four-column standardisation of n = 428 rows fails and every seed releases
  # 0 with an infinite interval (fwl_score's gram_guard), so seeds could not be told apart
  mroz <- mroz_data()
  res <- seeded(dp_coef(MROZ_FORMULA, mroz, coef = "educ", epsilon = 3, bounds = list(educ = c(0, 20)), seed = 3))
  expect_s3_class(res, "dp_result")
  # the same number computed by calling Python directly, on reticulate's own conversion of the data frame
  dp <- reticulate::import("dpstats", convert = TRUE)
  py <- py_seeded(dp$private_coef(reticulate::r_to_py(mroz), "lwage ~ educ + exper + I(exper**2)", coef = "educ",
                        epsilon = 3, bounds = reticulate::dict(educ = c(0, 20)), seed = 3L))
  expect_identical(unname(coef(res)), py$estimate)
  expect_identical(res$n, 428L)
  expect_identical(res$method, py$method)
  # another seed, another release
  other <- seeded(dp_coef(MROZ_FORMULA, mroz, coef = "educ", epsilon = 3, bounds = list(educ = c(0, 20)), seed = 4))
  expect_false(identical(coef(other), coef(res)))
  again <- seeded(dp_coef(MROZ_FORMULA, mroz, coef = "educ", epsilon = 3, bounds = list(educ = c(0, 20)), seed = 3))
  expect_identical(coef(again), coef(res))
}) })

test_that("dp_ols and dp_mean match Python and name their estimates", { quiet_missing({
  mroz <- mroz_data()
  dp <- reticulate::import("dpstats", convert = TRUE)
  ols <- seeded(dp_ols(lwage ~ educ + exper, mroz, epsilon = 2, bounds = list(educ = c(0, 20)), seed = 5))
  py <- py_seeded(dp$private_ols(reticulate::r_to_py(mroz), "lwage ~ educ + exper", epsilon = 2,
                       bounds = reticulate::dict(educ = c(0, 20)), seed = 5L))
  expect_identical(names(coef(ols)), c("Intercept", "educ", "exper"))
  # (numpy arrays are read as lists: reticulate 1.28 cannot convert numpy 2 arrays)
  expect_identical(unname(coef(ols)), as.numeric(unlist(py$estimate$tolist())))
  m <- seeded(dp_mean(mroz, c("educ", "age"), epsilon = 1, bounds = list(educ = c(0, 20), age = c(18, 65)), seed = 2))
  pm <- py_seeded(dp$private_mean(reticulate::r_to_py(mroz), list("educ", "age"), epsilon = 1,
                        bounds = reticulate::dict(educ = c(0, 20), age = c(18, 65)), seed = 2L))
  expect_identical(unname(coef(m)), as.numeric(unlist(pm$estimate$tolist())))
  expect_identical(m$n, 753L)
}) })

test_that("result methods: print, summary, tidy, interpretation", { quiet_missing({
  mroz <- mroz_data()
  res <- dp_coef(MROZ_FORMULA, mroz, coef = "educ", epsilon = 1, delta = 1e-7, bounds = list(educ = c(0, 20)))
  expect_output(print(res), "Differentially private regression coefficient")
  expect_output(print(summary(res)), "lwage ~ educ + exper + I(exper ** 2)", fixed = TRUE)
  expect_output(print(summary(res)), "educ in [0, 20]", fixed = TRUE)
  td <- dp_tidy(res)
  expect_identical(names(td), c("term", "estimate", "std.error", "conf.low", "conf.high", "epsilon", "delta", "method",
                    "interpretation"))
  expect_identical(td$term, "educ")
  expect_identical(td$estimate, unname(coef(res)))
  expect_identical(td$delta, 1e-7)
  expect_identical(as.data.frame(res), td)
  txt <- dp_interpretation(res)
  expect_s3_class(txt, "dp_text")
  expect_match(txt, "e^epsilon = 2.72", fixed = TRUE)
  # a release that is the method's fallback (at epsilon 1 fwl_score's standardisation often fails) says so
  # instead of describing the noise
  if (is.na(res$fallback)) expect_match(txt, "noise") else expect_match(txt, "was not estimated", fixed = TRUE)
  expect_output(print(txt), "differentially private")
  # the non-private diagnostics are kept apart and out of the printed release
  expect_identical(res$diagnostics$dropped_missing, 325L)
  expect_false(grepl("325", paste(capture.output(print(summary(res))), collapse = "\n")))
}) })

test_that("missing values survive the trip to Python in every column type", {
  skip_if_no_dpstats()
  set.seed(1)
  n <- 60
  df <- data.frame(
    y = rnorm(n), x = rnorm(n), k = sample(1:5, n, TRUE), flag = sample(c(TRUE, FALSE), n, TRUE),
    grp = factor(sample(c("a", "b", "c"), n, TRUE)), lab = sample(c("u", "v"), n, TRUE),
    stringsAsFactors = FALSE
  )
  df$k[1:3] <- NA
  df$flag[4:5] <- NA
  df$grp[6] <- NA
  df$lab[7] <- NA
  # the count of dropped rows is told to the analyst (computed without privacy)
  expect_warning(
    expect_warning(res <- dp_ols(y ~ x + k + flag + grp + lab, df, epsilon = 1), "read from the data",
                   class = "dpstats_privacy_leak"),
    "7 rows with a missing value", class = "dpstats_UserWarning")
  expect_identical(res$n, as.integer(n - 7))
  expect_identical(res$diagnostics$dropped_missing, 7L)
  expect_true("C(grp)[T.b]" %in% names(coef(res)) || "grp[T.b]" %in% names(coef(res)))
  expect_true("lab[T.v]" %in% names(coef(res)))
  back <- dpstats:::dp_columns_from_py(reticulate::import_from_path(
    "dpstats_r", system.file("python", package = "dpstats"))$frame_to_r(
      do.call(reticulate::import_from_path("dpstats_r", system.file("python", package = "dpstats"))$frame_from_r,
              unname(dpstats:::dp_columns_to_py(df)))))
  expect_identical(back$k, as.numeric(df$k))
  expect_identical(back$flag, as.numeric(df$flag))
  expect_identical(back$grp, df$grp)
  expect_identical(back$lab, df$lab)
})

test_that("Python errors arrive as dpstats_error conditions with the Python message", {
  mroz <- mroz_data()
  expect_error(dp_coef(MROZ_FORMULA, mroz, coef = "educ", epsilon = 0), "^epsilon must be a positive",
               class = "dpstats_error")
  e <- tryCatch(dp_coef(MROZ_FORMULA, mroz, coef = "educ", epsilon = 1, method = "nope"), error = identity)
  expect_s3_class(e, "dpstats_ValueError")
  expect_match(conditionMessage(e), "method: unknown method 'nope' for private_coef\\(\\); known: .*adassp")
  expect_identical(e$python_type, "ValueError")
  expect_error(dp_coef(MROZ_FORMULA, mroz, coef = "schooling", epsilon = 1), "^coef: 'schooling'",
               class = "dpstats_error")
  expect_error(dp_coef(lwage ~ schooling, mroz, coef = "schooling", epsilon = 1), class = "dpstats_error")
  expect_error(dp_coef(MROZ_FORMULA, mroz, coef = "educ"), "epsilon is required", class = "dpstats_error")
  expect_error(dp_mean(mroz, "educ", epsilon = 1, bounds = list(educ = c(30, 40))), "contains none",
               class = "dpstats_error")
  expect_error(dp_coef(MROZ_FORMULA, mroz, coef = "educ", epsilon = 1, bounds = c(0, 20)), "named list",
               class = "dpstats_error")
})

test_that("Python warnings arrive as R warnings", { quiet_missing({
  mroz <- mroz_data()
  expect_warning(dp_coef(MROZ_FORMULA, mroz, coef = "educ", epsilon = 1, bounds = list(educ = c(0, 12))),
                 "lie outside the declared range", class = "dpstats_warning")
  expect_warning(dp_coef(MROZ_FORMULA, mroz, coef = "educ", epsilon = 1, delta = 0.01, bounds = list(educ = c(0, 20))),
                 "exceeds 1/n", class = "dpstats_UserWarning")
  algos <- dp_algorithms("sce")
  leaky <- algos$name[algos$interpretation != "standard"]
  skip_if(length(leaky) == 0L, "no non-standard sce algorithm registered")
  expect_warning(res <- dp_coef(MROZ_FORMULA, mroz, coef = "educ", epsilon = 1, method = leaky[1],
                                bounds = list(educ = c(0, 20))),
                 class = "dpstats_privacy_leak")
  expect_false(identical(res$interpretation_class, "standard"))
  expect_output(print(res), "NOT differentially private")
}) })

test_that("a declined release is a result", { quiet_missing({
  mroz <- mroz_data()
  algos <- dp_algorithms("sce")
  skip_if_not("noisystats" %in% algos$name, "noisystats is not registered")
  res <- dp_coef(MROZ_FORMULA, mroz, coef = "educ", epsilon = 1, method = "noisystats")
  expect_true(res$declined)
  expect_true(is.na(coef(res)))
  expect_output(print(res), "declined")
}) })

test_that("integer columns keep Python's level names, and R's coefficient names are accepted", { quiet_missing({
  mroz <- mroz_data()
  expect_type(mroz$city, "integer")
  seeded(expect_warning(res <- dp_coef(lwage ~ educ + factor(city), mroz, coef = "factor(city)1", epsilon = 1,
                                       seed = 1), "levels of \\['city'\\] are read", class = "dpstats_privacy_leak"))
  expect_identical(names(coef(res)), "C(city)[T.1]")
  same <- seeded(dp_coef("lwage ~ educ + C(city)", mroz, coef = "C(city)[T.1]", epsilon = 1, seed = 1,
                         levels = list(city = c(0, 1))))
  expect_identical(coef(same), coef(res))
}) })

test_that("without a seed the noise is secret: two calls differ, and no seed is kept or printed", { quiet_missing({
  mroz <- mroz_data()
  expect_null(formals(dp_coef)$seed)
  expect_null(formals(dp_ols)$seed)
  expect_null(formals(dp_mean)$seed)
  a <- dp_coef(MROZ_FORMULA, mroz, coef = "educ", epsilon = 1, bounds = list(educ = c(0, 20)), method = "adassp_std")
  b <- dp_coef(MROZ_FORMULA, mroz, coef = "educ", epsilon = 1, bounds = list(educ = c(0, 20)), method = "adassp_std")
  expect_false(identical(coef(a), coef(b)))
  m1 <- dp_mean(mroz, "educ", epsilon = 1, bounds = list(educ = c(0, 20)))
  m2 <- dp_mean(mroz, "educ", epsilon = 1, bounds = list(educ = c(0, 20)))
  expect_false(identical(coef(m1), coef(m2)))
  expect_false(a$seeded)
  # a seed warns, reproduces, and shows nowhere
  expect_warning(s1 <- dp_ols(lwage ~ educ, mroz, epsilon = 1, bounds = list(educ = c(0, 20)), seed = 918273645),
                 "fixed seed", class = "dpstats_privacy_leak")
  s2 <- seeded(dp_ols(lwage ~ educ, mroz, epsilon = 1, bounds = list(educ = c(0, 20)), seed = 918273645))
  expect_identical(coef(s1), coef(s2))
  expect_false("seed" %in% names(s1))
  expect_true(s1$seeded)
  shown <- paste(c(capture.output(print(s1)), capture.output(print(summary(s1))),
                   capture.output(print(dp_tidy(s1))), capture.output(print(dp_interpretation(s1)))), collapse = "\n")
  expect_false(grepl("918273645", shown, fixed = TRUE))
  expect_match(shown, "fixed seed")
}) })

test_that("epsilon is required and secure reaches Python", {
  mroz <- mroz_data()
  for (f in list(dp_coef, dp_ols, dp_mean)) expect_identical(formals(f)$epsilon, quote(expr = ))
  expect_error(dp_ols(lwage ~ educ, mroz), "epsilon is required", class = "dpstats_error")
  expect_error(dp_mean(mroz, "educ"), "epsilon is required", class = "dpstats_error")
  expect_false(formals(dp_coef)$secure)
  expect_error(dp_mean(mroz, "educ", epsilon = 1, secure = "yes"), "secure must be True or False",
               class = "dpstats_TypeError")
})

test_that("declared levels fix the dummy columns whatever the data hold", { quiet_missing({
  mroz <- mroz_data()
  lv <- list(city = c(0, 1))
  town <- mroz[mroz$city == 0, ]            # no city-dweller at all: C(city)[T.1] is a column of zeros
  full <- dp_ols(lwage ~ educ + factor(city), mroz, epsilon = 1, bounds = list(educ = c(0, 20)), levels = lv)
  part <- dp_ols(lwage ~ educ + factor(city), town, epsilon = 1, bounds = list(educ = c(0, 20)), levels = lv)
  expect_identical(names(coef(full)), c("Intercept", "C(city)[T.1]", "educ"))
  expect_identical(names(coef(part)), names(coef(full)))
  expect_true(all(is.finite(coef(part))))
  expect_length(part$levels_from_data, 0L)
  expect_output(print(summary(part)), "public levels: city in {0, 1}", fixed = TRUE)
  # without declared levels: the empty dummy is dropped by looking at the data, and a warning says so
  expect_warning(undeclared <- dp_ols(lwage ~ educ + factor(city), town, epsilon = 1,
                                      bounds = list(educ = c(0, 20))),
                 "read from the data", class = "dpstats_privacy_leak")
  expect_identical(names(coef(undeclared)), c("Intercept", "educ"))
  expect_identical(undeclared$levels_from_data, "city")
  expect_match(dp_interpretation(undeclared), "levels of city were read from the data")
  # a factor column with a declared level it never takes
  df <- transform(mroz, kids = factor(ifelse(kidslt6 > 0, "young", "none")))
  k <- dp_coef(lwage ~ educ + kids, df, coef = "kids[T.teen]", epsilon = 1, bounds = list(educ = c(0, 20)),
               levels = list(kids = c("none", "young", "teen")))
  expect_true(is.finite(coef(k)))
  # a value in the data that is not declared
  expect_error(dp_ols(lwage ~ educ + factor(city), mroz, epsilon = 1, levels = list(city = 1)),
               "levels: column 'city' has value\\(s\\) 0 not among its declared levels", class = "dpstats_error")
  expect_error(dp_ols(lwage ~ educ, mroz, epsilon = 1, levels = c("a", "b")), "named list", class = "dpstats_error")
  # means of a column with declared levels are its shares
  sh <- dp_mean(df, c("educ", "kids"), epsilon = 1, bounds = list(educ = c(0, 20)),
                levels = list(kids = c("none", "young", "teen")))
  expect_identical(names(coef(sh)), c("educ", "kids[none]", "kids[young]", "kids[teen]"))
}) })

test_that("the default gives a standard error, confint and broom's columns, as in Python", {
  mroz <- mroz_data()
  res <- seeded(dp_mean(mroz, c("educ", "age"), epsilon = 1, seed = 4))
  expect_identical(res$method, "adaptive_whiten")
  # (confint's message on an uninformative interval is tested in test-methods.R)
  ci <- quiet_uninformative(confint(res))
  expect_identical(dim(ci), c(2L, 2L))
  expect_identical(rownames(ci), c("educ", "age"))
  expect_true(all(ci[, 1] <= coef(res) & coef(res) <= ci[, 2]))
  dp <- reticulate::import("dpstats", convert = TRUE)
  py <- py_seeded(dp$private_mean(reticulate::r_to_py(mroz), list("educ", "age"), epsilon = 1, seed = 4L))
  pyci <- py$conf_int(level = 0.9)
  ci90 <- quiet_uninformative(confint(res, level = 0.9))
  expect_equal(unname(ci90[, 1]), as.numeric(unlist(pyci[["conf.low"]]$tolist())), tolerance = 1e-12)
  td <- dp_tidy(res)
  expect_true(all(c("std.error", "conf.low", "conf.high") %in% names(td)))
  expect_equal(td$conf.low, unname(ci[, 1]))
  expect_true(all(td$std.error > 0))
  expect_output(print(summary(res)), "population mean", fixed = TRUE)
  expect_identical(rownames(confint(res, "age")), "age")
})

test_that("confint: a bad level or a release without an interval is an error naming the argument", { quiet_missing({
  mroz <- mroz_data()
  res <- seeded(dp_mean(mroz, "educ", epsilon = 1, seed = 1, bounds = list(educ = c(0, 20))))
  expect_error(confint(res, level = 1), "level must lie in (0, 1)", fixed = TRUE)
  expect_error(confint(res, level = 0), "level", class = "dpstats_error")
  plain <- seeded(dp_mean(mroz, "educ", epsilon = 1, seed = 1, bounds = list(educ = c(0, 20)), inference = FALSE))
  expect_error(confint(plain), "inference = TRUE", fixed = TRUE)
  expect_true(all(is.na(dp_tidy(plain)$std.error)))
  expect_error(dp_mean(mroz, "educ", epsilon = 1, inference = "yes"), "inference must be TRUE, FALSE or NULL")
  expect_error(seeded(dp_mean(mroz, "educ", epsilon = 1, seed = 1, method = "adaptive_clip", inference = TRUE)),
               "inference: method 'adaptive_clip' gives no", fixed = TRUE)
  cf <- seeded(dp_coef(lwage ~ educ + exper, mroz, coef = "educ", epsilon = 1, seed = 2,
                       bounds = list(educ = c(0, 20))))
  expect_identical(cf$method, "fwl_score")
  expect_identical(dim(quiet_uninformative(confint(cf))), c(1L, 2L))
}) })

test_that("the columns named by weights= and cluster= reach Python", { quiet_missing({
  mroz <- mroz_data()
  mroz$w <- 1 + (seq_len(nrow(mroz)) %% 3)
  mroz$grp <- rep(seq_len(60), length.out = nrow(mroz))
  res <- seeded(dp_coef(lwage ~ educ + exper, mroz, coef = "educ", epsilon = 3, weights = "w", seed = 1))
  dp <- reticulate::import("dpstats", convert = TRUE)
  py <- py_seeded(dp$private_coef(reticulate::r_to_py(mroz), "lwage ~ educ + exper", coef = "educ", epsilon = 3,
                                  weights = "w", seed = 1L))
  expect_identical(unname(coef(res)), py$estimate)
  expect_identical(res$weights, "w")
  expect_match(res$summary_text, "weights:     w (weighted least squares", fixed = TRUE)
  ols <- seeded(dp_ols(lwage ~ educ + exper, mroz, epsilon = 3, weights = "w", seed = 1))
  expect_identical(names(coef(ols)), c("Intercept", "educ", "exper"))
  # a column named only by cluster= (before, R sent only the formula's variables and Python could not find it)
  cl <- seeded(dp_coef(lwage ~ educ + exper, mroz, coef = "educ", epsilon = 3, cluster = "grp", seed = 1))
  expect_s3_class(cl, "dp_result")
  expect_error(dp_coef(lwage ~ educ, mroz, coef = "educ", epsilon = 1, weights = "nope"),
               "^weights: 'nope' is not a column of data", class = "dpstats_error")
}) })
