test_that("R formulas translate to dpstats (patsy) syntax", {
  expect_identical(dp_formula(lwage ~ educ + exper), "lwage ~ educ + exper")
  expect_identical(dp_formula(log(wage) ~ educ + I(exper^2)), "log(wage) ~ educ + I(exper ** 2)")
  expect_identical(dp_formula(y ~ factor(region) + x), "y ~ C(region) + x")
  expect_identical(dp_formula(y ~ a * b - 1), "y ~ a * b - 1")
  expect_identical(dp_formula(y ~ a:b + 0), "y ~ a:b + 0")
  expect_identical(dp_formula(y ~ a * (b + c)), "y ~ a * (b + c)")
  expect_identical(dp_formula(y ~ log10(x) + sqrt(z)), "y ~ np.log10(x) + sqrt(z)")
  expect_identical(dp_formula(y ~ `odd name`), "y ~ Q(\"odd name\")")
  expect_identical(dp_formula("lwage ~ C(region)"), "lwage ~ C(region)")
})

test_that("unsupported formulas raise a dpstats_error", {
  expect_error(dp_formula(y ~ .), class = "dpstats_error")
  expect_error(dp_formula(y ~ poly(x, 2)), "poly\\(\\) has no dpstats translation", class = "dpstats_error")
  expect_error(dp_formula(~ x), class = "dpstats_error")
  expect_error(dp_formula("y + x"), "outcome ~ regressors", class = "dpstats_error")
})

test_that("R coefficient names map to dpstats' names", {
  expect_identical(dpstats:::dp_coef_name("educ"), "educ")
  expect_identical(dpstats:::dp_coef_name("factor(region)south"), "C(region)[T.south]")
  expect_identical(dpstats:::dp_coef_name("I(exper^2)"), "I(exper ** 2)")
})

test_that("the missing-Python message says how to fix it", {
  msg <- dpstats:::dp_python_missing_message()
  expect_match(msg, "RETICULATE_PYTHON", fixed = TRUE)
  expect_match(msg, "pip install dpstats", fixed = TRUE)
  expect_match(msg, "pip install -e /path/to/dpstats", fixed = TRUE)
})

test_that("dp_leaderboard reads a leaderboard, Inf included", {
  dir <- tempfile("report")
  dir.create(dir)
  writeLines(c(
    "task,epsilon,slice,algorithm,interpretation,tau50,reaches,rank,instances,studies,corpus",
    "sce,1.0,all,a,standard,5.25,1.0,1,43,43,public",
    "sce,1.0,all,b,standard,inf,0.2,2,43,43,public",
    "sce,1.0,all,c,data-bounds,7.0,1.0,,43,43,public"
  ), file.path(dir, "leaderboard.csv"))
  lb <- dp_leaderboard(dir)
  expect_s3_class(lb, "data.frame")
  expect_identical(lb$algorithm, c("a", "b", "c"))
  expect_identical(lb$tau50, c(5.25, Inf, 7))
  expect_identical(lb$rank, c(1L, 2L, NA))
  expect_identical(dp_leaderboard(file.path(dir, "leaderboard.csv")), lb)
  expect_error(dp_leaderboard(file.path(dir, "nope.csv")), class = "dpstats_error")
})
