package httpapi

import (
	"log/slog"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/serverkit"
)

// tenantJobJSON is a tenant job on the wire (schemas/tenant-job.json).
type tenantJobJSON struct {
	ID               string                   `json:"id"`
	Tenant           string                   `json:"tenant"`
	TenantAttributes storage.TenantAttributes `json:"tenantAttributes"`
	Complete         bool                     `json:"complete"`
	Error            string                   `json:"error,omitempty"`
	Messages         []string                 `json:"messages"`
}

func toTenantJobJSON(j storage.TenantJob) tenantJobJSON {
	return tenantJobJSON{
		ID:               j.ID,
		Tenant:           string(j.Tenant),
		TenantAttributes: j.Attributes,
		Complete:         j.Complete,
		Error:            j.Error,
		Messages:         j.Messages,
	}
}

// postTenant is Okapi's tenant interface: module_to enables or upgrades the
// tenant (201 with the finished job), purge drops its data (204), and
// module_from alone disables it, which keeps the data and needs no work (204).
func (s *Server) postTenant(c echo.Context) error {
	var attrs storage.TenantAttributes
	if err := s.bind(c, &attrs); err != nil {
		return err
	}
	ctx := c.Request().Context()
	t := tenantOf(c)
	op := "init"
	switch {
	case attrs.Purge:
		op = "purge"
	case attrs.ModuleTo == "":
		op = "disable"
	case attrs.ModuleFrom != "":
		op = "upgrade"
	}
	// Every tenant operation is an administrator's act: audited.
	s.Logger().InfoContext(ctx, "tenant operation", slog.String("operation", op), slog.String("module_to", attrs.ModuleTo),
		slog.String("module_from", attrs.ModuleFrom), slog.String("caller", serverkit.Caller(ctx)))
	switch {
	case attrs.Purge:
		if err := s.svc.Tenants.Purge(ctx, t); err != nil {
			return err
		}
		return c.NoContent(http.StatusNoContent)
	case attrs.ModuleTo == "":
		return c.NoContent(http.StatusNoContent)
	}
	job, err := s.svc.Tenants.Init(ctx, t, attrs)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, "/_/tenant/"+job.ID)
	return c.JSON(http.StatusCreated, toTenantJobJSON(job))
}

func (s *Server) getTenantJob(c echo.Context) error {
	id, err := s.pathID(c, "job")
	if err != nil {
		return err
	}
	job, err := s.svc.Tenants.Job(c.Request().Context(), tenantOf(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toTenantJobJSON(job))
}

func (s *Server) deleteTenantJob(c echo.Context) error {
	id, err := s.pathID(c, "job")
	if err != nil {
		return err
	}
	if err := s.svc.Tenants.DeleteJob(c.Request().Context(), tenantOf(c), id); err != nil {
		return err
	}
	s.Logger().InfoContext(c.Request().Context(), "tenant job forgotten", slog.String("job_id", id),
		slog.String("caller", serverkit.Caller(c.Request().Context())))
	return c.NoContent(http.StatusNoContent)
}

func formatInt(n int64) string { return strconv.FormatInt(n, 10) }
