-- Create schema @P1 unless it exists (CREATE SCHEMA must be a batch of its own, and EXEC takes
-- variables and literals only, hence the variable).
IF SCHEMA_ID(@P1) IS NULL
BEGIN
    DECLARE @create NVARCHAR(300) = N'CREATE SCHEMA ' + QUOTENAME(@P1);
    EXEC (@create);
END
